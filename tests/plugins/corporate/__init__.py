"""corporate"""
