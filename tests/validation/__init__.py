"""Validation tiers (a package so its conftest and modules never clash with tests/conftest.py)."""
