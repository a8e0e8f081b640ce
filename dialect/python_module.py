"""A Python module for the xhlo dialect, which MLIR's bindings look for and otherwise miss.

Every time the bindings wrap an op in an `OpView` (iterating a block, an op given to a
rewrite pattern), they import the Python module of the op's dialect from their search
prefixes (`mlir.dialects.<name>`) and remember only a success: for xhlo ops, which have no
such module, each wrap searched the file system again (~15 µs; once per xhlo op in
parsing, verification and every lowering pattern). This module's `xhlo` (empty: the ops
stay generic `OpView`s, as without it) is found once and remembered. Imported by
`dialect.verify`, which every compile path imports.
"""

from __future__ import annotations

import sys
import types

from mlir._mlir_libs import _mlir

from .registry import DIALECT

# The bindings import "<prefix>.<dialect>"; a module in sys.modules needs no package.
MODULE_NAME = f"{__name__}.{DIALECT}"


def _install() -> None:
    if MODULE_NAME in sys.modules:
        return
    sys.modules[MODULE_NAME] = types.ModuleType(MODULE_NAME, f"The ops of the {DIALECT} dialect "
                                                "have no Python classes (dialect/python_module.py).")
    if __name__ not in _mlir.globals.dialect_search_modules:
        _mlir.globals.append_dialect_search_prefix(__name__)


_install()
