"""Loads the op-family modules, each of which registers its handlers in `importer.HANDLERS`.
Kept apart so that `import xlamlir` does not import jaxlib."""

from __future__ import annotations

import functools


@functools.cache
def load_handlers() -> None:
    from . import (  # noqa: F401
        householder,
        jacobi,
        lapack,
        ops_control,
        ops_elementwise,
        ops_linalg,
        ops_misc,
        ops_reduce,
        ops_shape,
    )
