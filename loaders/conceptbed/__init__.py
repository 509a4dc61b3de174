"""loaders/conceptbed"""
