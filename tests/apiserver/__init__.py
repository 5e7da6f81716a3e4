"""Validation tiers (a package so its conftest and modules never clash with tests/conftest.py; tests/e2e
imports validation.control_plane and validation.validation_support from it)."""
