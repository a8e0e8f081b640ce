"""Ops of the conv family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
