"""middleware"""
