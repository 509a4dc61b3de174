"""loaders/sub"""
