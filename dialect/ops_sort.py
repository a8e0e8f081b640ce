"""Ops of the sort family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
