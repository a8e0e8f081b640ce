"""Ops of the control family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
