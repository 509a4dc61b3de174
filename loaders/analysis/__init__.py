"""loaders/analysis"""
