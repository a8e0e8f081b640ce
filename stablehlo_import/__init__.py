"""Import StableHLO (text, bytecode, portable artifacts, jax programs) as XlaComputations.

`import_stablehlo(source)` parses with jaxlib's MLIR, legalizes chlo, refines shapes, inlines
calls, then rebuilds every op with the public XlaBuilder API (`importer.py`; one module per op
family). `jit(fn)` does that for a JAX function per argument signature. jax is imported lazily:
xlamlir works without it, and these two raise CompileError naming the missing extra.
"""

from __future__ import annotations

from typing import Any

from ..dialect.errors import CompileError, XlaError
from .jit import jit


def import_stablehlo(source: Any, *, filename: str | None = None) -> Any:
    """The `@main` function of a StableHLO module as an `xm.XlaComputation`.

    `source`: StableHLO text (pretty or generic form), MLIR bytecode or a portable artifact
    (bytes), a jax `Lowered` (`jax.jit(f).lower(...)`) or a `jax.export.Exported`.
    Parameters keep their order; one result is the computation's result, several a tuple.
    `filename` names the source in error messages. The module's `mhlo.num_replicas` is kept
    as the computation's `num_replicas`. Raises `xm.CompileError` naming the op and its
    location for anything not importable.
    """
    from . import parsing
    from .importer import Importer
    from .registry import load_handlers

    parsing.jaxlib_modules()  # a CompileError naming the extra when jax is missing
    load_handlers()
    module = parsing.parse(source, filename)
    try:
        with parsing.context():
            parsing.legalize(module, filename)
            importer = Importer(module, filename)
            computation = importer.entry()
    except XlaError:
        raise
    except Exception as e:  # noqa: BLE001 - a module shape the importer did not expect: no crash
        raise CompileError(f"cannot import the module: {type(e).__name__}: {e}", stage="import") from e
    computation.num_replicas = importer.num_replicas
    return computation


__all__ = ["import_stablehlo", "jit"]
