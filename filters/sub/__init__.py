"""filters/sub"""
