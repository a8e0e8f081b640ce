"""`xm.jit(fn)`: run a JAX function through xlamlir (lower with jax, import, compile, cache)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dialect.errors import CompileError


def _jax() -> Any:
    try:
        import jax
    except ImportError as e:
        raise CompileError(f"xm.jit needs jax (pip install 'xlamlir[jax]'): {e}") from e
    return jax


class Jitted:
    """`fn` compiled by xlamlir once per argument signature (pytree structure, shapes, dtypes).

    Arguments and results are pytrees as in jax (tuples, lists, dicts of arrays); leaves are
    converted to the dtypes jax lowered them with (float64 -> float32 unless jax_enable_x64),
    results come back as numpy arrays in `fn`'s result structure.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._compiled: dict[Any, tuple[Any, list[np.dtype], Any]] = {}
        functools.update_wrapper(self, fn)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """The XlaComputation of `fn` for these arguments' shapes and dtypes."""
        from . import import_stablehlo

        return import_stablehlo(_jax().jit(self.fn, keep_unused=True).lower(*args, **kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import xlamlir as xm

        jax = _jax()
        # jax flattens (args, kwargs) in this order into @main's parameters.
        leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
        arrays = [np.asarray(x) for x in leaves]
        key = (tree, tuple((a.shape, a.dtype.str) for a in arrays))
        entry = self._compiled.get(key)
        if entry is None:
            from . import import_stablehlo

            lowered = jax.jit(self.fn, keep_unused=True).lower(*args, **kwargs)
            computation = import_stablehlo(lowered)
            exe = xm.compile(computation, num_replicas=getattr(computation, "num_replicas", 1))
            dtypes = [xm.dtype_of(s.element_type) for s in computation.program_shape()[0]]
            entry = (exe, dtypes, lowered.out_tree)
            self._compiled[key] = entry
        exe, dtypes, out_tree = entry
        if len(dtypes) != len(arrays):
            # jax drops arguments it does not use (keep_unused=False): lower again to learn which.
            raise CompileError(f"{self.fn.__name__}: jax lowered {len(dtypes)} parameters for "
                               f"{len(arrays)} array arguments")
        result = exe(*[a.astype(d, copy=False) for a, d in zip(arrays, dtypes)])
        flat = list(result) if isinstance(result, tuple) and out_tree.num_leaves != 1 else [result]
        return jax.tree_util.tree_unflatten(out_tree, flat)


def jit(fn: Callable[..., Any]) -> Jitted:
    """`xm.jit(f)(*arrays)` lowers `f` with jax for those shapes and dtypes, imports the
    StableHLO, compiles it (cached per signature) and runs it; `xm.jit(f).lower(*arrays)` gives
    the XlaComputation."""
    return Jitted(fn)
