"""The JAX side of the benchmarks: imported when installed (the `bench`/`jax` extra),
on the CPU, with its compile timed the same way as ours (lower + compile, no cache hit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

try:  # optional
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_platforms", "cpu")
except Exception:  # noqa: BLE001 - any import problem means "no JAX column"
    jax = None
    jnp = None


def jax_compile(fn: Callable[..., Any],
                args: tuple[Any, ...]) -> tuple[Callable[[], Any], Callable[[], Any], float]:
    """`fn` compiled by XLA for these arguments: (a call returning numpy results, a call
    that blocks until the result is ready, for timing), and the lower+compile seconds."""
    assert jax is not None
    device_args = tuple(jnp.asarray(a) for a in args)
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*device_args).compile()
    seconds = time.perf_counter() - start

    def to_numpy() -> Any:
        out = compiled(*device_args)
        return tuple(map(_host, out)) if isinstance(out, (tuple, list)) else _host(out)

    return to_numpy, lambda: jax.block_until_ready(compiled(*device_args)), seconds


def _host(x: Any) -> Any:
    import numpy as np

    return np.asarray(x)
