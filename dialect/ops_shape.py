"""Ops of the shape family (see the issue on data movement, reductions and dot products).

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
