"""Ops of the rng family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
