"""Memory stays bounded: running one executable 100,000 times, and compiling many different
computations (the compile cache is an LRU of runtime.compiler.CACHE_SIZE = 128 executables;
an evicted executable's JIT engine is released, and so is every MLIR context but the
thread's reusable one, dialect/context.py: reused_context).

RSS growth is measured as a ratio of the resident size after a warm-up. Compiling 1,000
computations takes minutes, so this test compiles 24 with the cache shrunk to 4 (the same
eviction path, 6x over capacity); `python tests/test_memory.py 1000` runs the long form with
the real cache size.
"""

from __future__ import annotations

import gc
import sys
import weakref

import numpy as np
import pytest
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import reused_context
from xlamlir.runtime import compiler


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _computation(k: int) -> xm.XlaComputation:
    """A different small computation for every k (so none is a cache hit)."""
    b = xm.XlaBuilder(f"mem{k}")
    x = b.parameter(0, xm.Shape.array(xm.F32, (64,)))
    y = b.reduce(b.mul(x, b.constant(np.float32(k))), b.constant(np.float32(0)), lambda p, q: p + q,
                 [0])
    b.tuple([b.add(x, b.tanh(x)), y])
    return b.build()


def test_100k_calls_keep_rss_bounded() -> None:
    b = xm.XlaBuilder("calls")
    x = b.parameter(0, xm.Shape.array(xm.F32, (256,)))
    y = b.parameter(1, xm.Shape.array(xm.S32, ()))
    b.tuple([b.add(x, b.convert_element_type(y, xm.F32)), b.reduce(
        x, b.constant(np.float32(0)), lambda p, q: p + q, [0])])
    exe = xm.compile(b.build())
    a = np.ones(256, np.float32)
    strided = np.ones(512, np.float32)[::2]  # the dynamic-stride variant's path too
    for _ in range(2000):
        exe(a, 1)
    for _ in range(200):
        exe(strided, 2)
    gc.collect()
    warm = rss_bytes()
    for k in range(90_000):
        exe(a, k)
    for _ in range(10_000):
        exe(strided, 2)
    out = exe(a, 3)
    gc.collect()
    growth = (rss_bytes() - warm) / warm
    assert out[0][0] == 4.0 and out[1] == 256.0
    assert growth < 0.02, f"RSS grew by {growth:.1%} over 100,000 calls"


@pytest.fixture
def small_cache(monkeypatch):
    compiler.clear_cache()
    monkeypatch.setattr(compiler, "CACHE_SIZE", 4)
    yield
    compiler.clear_cache()


def compile_many(count: int, start: int = 0) -> tuple[float, list[weakref.ref]]:
    """Compile and run `count` different computations; (RSS growth ratio after the first
    quarter, weak references to every executable)."""
    refs: list[weakref.ref] = []
    warm = 0
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    for k in range(start, start + count):
        exe = xm.compile(_computation(k))
        result = exe(x)
        assert abs(float(result[1]) - k * float(x.sum())) < 1e-3 * max(k, 1)
        refs.append(weakref.ref(exe))
        del exe, result
        if k - start + 1 == max(count // 4, 1):
            gc.collect()
            warm = rss_bytes()
    gc.collect()
    return (rss_bytes() - warm) / warm, refs


def test_compiling_many_computations_keeps_rss_bounded(small_cache) -> None:
    reused_context()  # the thread's context lives on by design: counted before
    contexts = ir.Context._get_live_count()
    growth, refs = compile_many(24)
    alive = sum(r() is not None for r in refs)
    assert alive <= compiler.CACHE_SIZE, f"{alive} executables outlive the cache"
    assert ir.Context._get_live_count() <= contexts, "MLIR contexts are not released"
    assert growth < 0.05, f"RSS grew by {growth:.1%} over 18 compiles past a full cache"


def test_cache_is_an_lru(small_cache) -> None:
    comps = [_computation(1000 + k) for k in range(5)]
    first = xm.compile(comps[0])
    for c in comps[1:4]:
        xm.compile(c)
    assert xm.compile(comps[0]) is first  # a hit moves it to the front...
    xm.compile(comps[4])  # ...so this evicts comps[1], not comps[0]
    assert xm.compile(comps[0]) is first
    assert len(compiler._cache) == 4
    assert compiler.CACHE_SIZE == 4


def test_default_cache_size_is_documented() -> None:
    import pathlib

    assert compiler.CACHE_SIZE == 128
    readme = (pathlib.Path(__file__).parent.parent / "README.md").read_text()
    assert "LRU of 128" in readme


if __name__ == "__main__":  # the long form: python tests/test_memory.py 1000
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    growth_all, all_refs = compile_many(n)
    print(f"{n} compiles: RSS {rss_bytes() / 2**20:.0f} MiB, growth after the first quarter "
          f"{growth_all:.1%}, executables alive {sum(r() is not None for r in all_refs)} "
          f"(cache {compiler.CACHE_SIZE}), MLIR contexts alive {ir.Context._get_live_count()}")
