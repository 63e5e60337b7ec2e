"""executions"""
