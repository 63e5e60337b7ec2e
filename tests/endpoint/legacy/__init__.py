"""legacy"""
