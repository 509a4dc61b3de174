"""filters/conceptbed"""
