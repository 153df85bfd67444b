"""dataplane/store"""
