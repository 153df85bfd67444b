"""dataplane/ha"""
