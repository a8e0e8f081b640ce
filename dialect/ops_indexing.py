"""Ops of the indexing family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
