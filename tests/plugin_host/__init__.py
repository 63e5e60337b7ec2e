"""plugin_host"""
