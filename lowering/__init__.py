"""Lowering of the xhlo dialect to LLVM (docs/architecture.md): `scalar` (one element's
code) <- `patterns` (the rewrite mechanism) <- `ops` (one module per op family) <-
`lower_pass` <- `pipeline`, with the pipeline's own passes in `passes`.

Imports `dialect`.
"""

from .pipeline import Pipeline

__all__ = ["Pipeline"]
