"""tenants"""
