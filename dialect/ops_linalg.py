"""Ops of the linalg family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
