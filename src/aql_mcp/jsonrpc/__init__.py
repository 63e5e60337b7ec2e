"""jsonrpc"""
