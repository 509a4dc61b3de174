"""filters/vqa"""
