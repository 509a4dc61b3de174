"""conceptforge/engine"""
