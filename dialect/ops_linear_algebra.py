"""Ops of the linear_algebra family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
