"""loaders/harness"""
