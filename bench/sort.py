"""Sort, top_k and cumulative sums against numpy (and JAX, when installed), each checked
before timing.

Prints one line per workload with our time, numpy's, JAX's and ours / the best of them,
medians of 20 calls measured in this run, in alternating blocks after pauses as `make
bench` times them (`timing.medians`: JAX's and OpenBLAS's threads spin for a while after
a call and took a core from whatever ran next). A shared machine is noisy: compare
ratios of one run, and repeat. top_k is compared with np.argpartition, which does not
order its k results (a lower bound). Run with `python bench/sort.py [filter]`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
from peers import jax, jnp
from timing import medians

import xlamlir as xm

CALLS = 20


def compiled(build: Callable[..., object], *arrays: np.ndarray) -> Callable[..., object]:
    b = xm.XlaBuilder("bench")
    params = [b.parameter(i, xm.Shape.array(xm.type_of(a.dtype), a.shape)) for i, a in enumerate(arrays)]
    return xm.compile(b.build(build(b, *params)))


def cases() -> list[tuple[str, Callable[..., object], Callable[..., object], np.ndarray]]:
    rng = np.random.default_rng(0)
    v = rng.standard_normal(1 << 20).astype(np.float32)
    m = rng.standard_normal((1024, 1024)).astype(np.float32)
    short = rng.standard_normal((4096, 256)).astype(np.float32)
    with_nans = short.copy()
    with_nans[rng.random(short.shape) < 0.01] = np.nan
    i = rng.integers(-1000, 1000, (1024, 1024)).astype(np.int32)
    topk_np = lambda a: np.argpartition(-a, 8, axis=-1)[:, :8]  # noqa: E731  (unordered: a lower bound)
    return [
        ("sort f32[1M]", lambda b, p: b.sort(p), np.sort, v),
        ("sort f32[1024,1024] last axis", lambda b, p: b.sort(p), np.sort, m),
        ("sort f32[4096,256] last axis", lambda b, p: b.sort(p), np.sort, short),
        ("sort f32[4096,256] last axis, 1% NaN", lambda b, p: b.sort(p), np.sort, with_nans),
        ("sort f32[16384,16] last axis", lambda b, p: b.sort(p), np.sort,
         short.reshape(16384, 64)[:, :16].copy()),
        ("sort s32[1024,1024] last axis", lambda b, p: b.sort(p), np.sort, i),
        ("sort f32[1024,1024] axis 0", lambda b, p: b.sort(p, dimension=0),
         lambda a: np.sort(a, axis=0), m),
        ("argsort f32[1M] stable",
         lambda b, p: b.sort([p, b.iota(xm.Shape.array(xm.S32, p.shape.dimensions), 0)], is_stable=True),
         lambda a: np.argsort(a, kind="stable"), v),
        ("top_k 8 f32[1024,1024]", lambda b, p: b.top_k(p, 8), topk_np, m),
        ("cumsum f32[1024,1024] axis 1", lambda b, p: b.reduce_window(
            p, b.constant(np.float32(0)), lambda x, y: x + y, (1, 1024), (1, 1), padding=[(0, 0), (1023, 0)]),
         lambda a: np.cumsum(a, axis=1), m),
        ("cumsum s32[1024,1024] axis 0", lambda b, p: b.reduce_window(
            p, b.constant(np.int32(0)), lambda x, y: x + y, (1024, 1), (1, 1), padding=[(1023, 0), (0, 0)]),
         lambda a: np.cumsum(a, axis=0, dtype=np.int32), i),
    ]


def check(name: str, ours: object, want: np.ndarray, x: np.ndarray) -> None:
    if name.startswith("top_k"):
        ok = np.array_equal(ours[0], -np.sort(-x, axis=-1)[:, :8])
    elif name.startswith("argsort"):
        ok = np.array_equal(ours[1], want)
    elif x.dtype.kind == "f" and name.startswith("cumsum"):
        ok = np.allclose(ours, want, rtol=1e-4, atol=1e-2)
    else:
        ok = np.array_equal(ours, want, equal_nan=x.dtype.kind == "f")
    if not ok:
        raise AssertionError(f"{name}: wrong result")


def jax_call(name: str, x: np.ndarray) -> Callable[[], object] | None:
    """JAX's call for the plain sorts (jnp.sort along the same axis), else None."""
    if jax is None or not name.startswith("sort "):
        return None
    fn = jax.jit(lambda a: jnp.sort(a, axis=0 if "axis 0" in name else -1))
    xd = jnp.asarray(x)
    return lambda: jax.block_until_ready(fn(xd))


def main(only: str = "") -> None:
    print(f"{'case':40} {'xlamlir ms':>11} {'numpy ms':>9} {'jax ms':>8} {'ours/best':>9}")
    for name, build, ref, x in cases():
        if only not in name:
            continue
        f = compiled(build, x)
        check(name, f(x), ref(x), x)
        ours, theirs, jaxs = (None if t is None else t * 1e3 for t in medians(
            [lambda: f(x), lambda: ref(x), jax_call(name, x)], CALLS))
        best = min(theirs, jaxs) if jaxs is not None else theirs
        jax_text = f"{jaxs:8.2f}" if jaxs is not None else f"{'-':>8}"
        print(f"{name:40} {ours:11.2f} {theirs:9.2f} {jax_text} {ours / best:9.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
