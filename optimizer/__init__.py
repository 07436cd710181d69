"""optimizer"""
