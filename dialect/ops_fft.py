"""Ops of the fft family.

Imports `dialect.registry`, `dialect.shapes`, `dialect.errors`.
"""
