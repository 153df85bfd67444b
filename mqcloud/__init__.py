"""mqcloud"""
