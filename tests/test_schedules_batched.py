"""Batched dot_general in the "tiled" stage: the batch dimensions are a parallel loop
around the 2-D matmul kernel (lowering/passes/schedules.py).

IR tests show, for linalg.batch_matmul and the two attention products ([B,H,S,D] x
[B,H,S,D] contracting D, [B,H,S,S] x [B,H,S,D]), a scf.forall over the batch, B packed
inside it and the register tile's vector.fma; numeric tests cover odd shapes (one batch
element, batch counts the cores do not divide, M, N, K off the tile sizes, zero-size),
batch dimensions that do not lead (left to the generic path) and the other types.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from conftest import check_ir

import xlamlir as xm
from xlamlir.lowering import schedules

TILES = [schedules.Params(threads=2, mr=6, nr=16), schedules.Params(threads=2, mr=8, nr=32),
         schedules.Params(threads=1, mr=8, nr=32), schedules.Params(threads=4, mr=6, nr=16)]
_PIPELINES = {str(p): xm.Pipeline.default().replace("tiled", schedules.scheduler(p)) for p in TILES}
tiles = pytest.mark.parametrize("p", TILES, ids=lambda p: f"{p.mr}x{p.nr}-{p.threads}t")


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule that fails raises here (it falls back to the generic path otherwise)."""
    monkeypatch.setattr(schedules, "STRICT", True)


def _dot(lhs: tuple[int, ...], rhs: tuple[int, ...], dims: xm.DotDimensionNumbers,
         dtype: object = xm.F32) -> xm.XlaComputation:
    b = xm.XlaBuilder("bdot")
    b.dot_general(b.parameter(0, xm.Shape.array(dtype, lhs)), b.parameter(1, xm.Shape.array(dtype, rhs)),
                  dims)
    return b.build()


def _bmm(batch: int, m: int, k: int, n: int, dtype: object = xm.F32) -> xm.XlaComputation:
    return _dot((batch, m, k), (batch, k, n), xm.DotDimensionNumbers((2,), (1,), (0,), (0,)), dtype)


# [B,H,S,D] x [B,H,S,D] -> [B,H,S,S] (Q K^T) and [B,H,S,S] x [B,H,S,D] -> [B,H,S,D] (P V).
QK = xm.DotDimensionNumbers((3,), (3,), (0, 1), (0, 1))
PV = xm.DotDimensionNumbers((3,), (2,), (0, 1), (0, 1))


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _scheduled(exe: xm.Executable) -> bool:
    return "vector.fma" in exe.stages["tiled"]


def _expected(lhs: np.ndarray, rhs: np.ndarray, dims: xm.DotDimensionNumbers) -> np.ndarray:
    """numpy's einsum of the dot in float64 (batch, lhs free, rhs free)."""
    letters = iter("abcdefghij")
    lhs_ix, rhs_ix = [""] * lhs.ndim, [""] * rhs.ndim
    out_batch, out_l, out_r = "", "", ""
    for i, j in zip(dims.lhs_batch_dimensions, dims.rhs_batch_dimensions):
        lhs_ix[i] = rhs_ix[j] = c = next(letters)
        out_batch += c
    for i, j in zip(dims.lhs_contracting_dimensions, dims.rhs_contracting_dimensions):
        lhs_ix[i] = rhs_ix[j] = next(letters)
    for ix in (lhs_ix, rhs_ix):
        for i, c in enumerate(ix):
            if not c:
                ix[i] = c = next(letters)
                if ix is lhs_ix:
                    out_l += c
                else:
                    out_r += c
    spec = f"{''.join(lhs_ix)},{''.join(rhs_ix)}->{out_batch}{out_l}{out_r}"
    return np.einsum(spec, lhs.astype(np.float64), rhs.astype(np.float64))


# -- IR ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("case", ["batch_matmul", "qk", "pv"])
def test_batched_dot_is_a_parallel_batch_loop_around_the_kernel(case: str) -> None:
    p = schedules.Params(threads=2, mr=8, nr=32)
    computation = {
        "batch_matmul": lambda: _bmm(8, 128, 64, 96),
        "qk": lambda: _dot((2, 4, 128, 64), (2, 4, 128, 64), QK),
        "pv": lambda: _dot((2, 4, 128, 128), (2, 4, 128, 64), PV),
    }[case]()
    exe = xm.compile(computation, _PIPELINES[str(p)])
    tiled = exe.stages["tiled"]
    # One parallel loop over the batch (8 elements: 4 per core), a loop over each core's
    # elements inside it, B packed per element (its panels transposed in vectors, by
    # shuffles where the transpose moves elements), and the 8 x 32 register tile: 8 fmas
    # per k step on a loop-carried accumulator.
    check_ir(tiled, """
        CHECK: scf.forall ({{.*}}) in (2) shared_outs({{.*}}) -> (tensor<8x
        CHECK: scf.for {{.*}} to %c4 step %c1
        CHECK: vector.transfer_write {{.*}} : vector<{{[0-9x]+}}xf32>, tensor<1x1x{{[0-9]+}}x32xf32>
        CHECK: scf.for {{.*}} iter_args({{.*}}) -> (vector<8x{{(1x)?}}32xf32>)
        CHECK-COUNT-8: vector.fma {{.*}} : vector<32xf32>
        CHECK: scf.forall.in_parallel
    """)
    assert tiled.count("scf.forall (") == 1
    assert "linalg.batch_matmul" not in tiled and "linalg.generic" not in tiled
    # Operands read in place and the result written into the output: the only temporary
    # is the packed B of one batch element, per core (no copy of an operand).
    bufferized = exe.stages["bufferized"]
    assert "memref.copy" not in bufferized
    allocs = re.findall(r"memref\.alloc\(\).*: (memref<[^>]*>)", bufferized)
    assert all(a.startswith("memref<1x") for a in allocs), allocs


def test_fewer_batch_elements_than_cores_split_each_product() -> None:
    p = schedules.Params(threads=4, mr=6, nr=16)
    exe = xm.compile(_bmm(2, 128, 64, 128), _PIPELINES[str(p)])
    # Two elements on four cores: one element per tile, each split again in two.
    assert re.search(r"scf\.forall \(%\w+, %\w+\) in \(2, 2\)", exe.stages["tiled"]), exe.stages["tiled"]


# -- numerics ------------------------------------------------------------------------------------

@tiles
@pytest.mark.parametrize("batch, m, k, n", [
    (1, 64, 64, 64), (3, 37, 100, 70), (5, 130, 257, 48), (2, 7, 600, 33), (4, 65, 64, 16),
    (9, 1, 512, 64), (2, 96, 96, 32),
])
def test_batch_matmul_matches_numpy(batch: int, m: int, k: int, n: int, p: schedules.Params) -> None:
    exe = xm.compile(_bmm(batch, m, k, n), _PIPELINES[str(p)])
    assert _scheduled(exe)
    lhs, rhs = _rand((batch, m, k), 0), _rand((batch, k, n), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)


@tiles
@pytest.mark.parametrize("b, h, s, d", [(1, 1, 64, 64), (2, 3, 33, 64), (1, 4, 100, 40)])
def test_attention_products_match_numpy(b: int, h: int, s: int, d: int, p: schedules.Params) -> None:
    q, k = _rand((b, h, s, d), 0), _rand((b, h, s, d), 1)
    exe = xm.compile(_dot(q.shape, k.shape, QK), _PIPELINES[str(p)])
    assert _scheduled(exe)
    np.testing.assert_allclose(exe(q, k), _expected(q, k, QK), rtol=1e-4, atol=1e-3)
    probs, v = _rand((b, h, s, s), 2), _rand((b, h, s, d), 3)
    exe = xm.compile(_dot(probs.shape, v.shape, PV), _PIPELINES[str(p)])
    assert _scheduled(exe)
    np.testing.assert_allclose(exe(probs, v), _expected(probs, v, PV), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("lhs, rhs, dims", [
    ((64, 3, 80), (3, 80, 64), xm.DotDimensionNumbers((2,), (1,), (1,), (0,))),  # batch not leading
    ((3, 80, 64), (3, 64, 80), xm.DotDimensionNumbers((1,), (2,), (0,), (0,))),  # A stored [k, m]
    ((2, 64, 3, 64), (2, 3, 64, 48), xm.DotDimensionNumbers((1,), (2,), (0, 2), (0, 1))),
])
def test_other_batched_layouts_match_numpy(lhs: tuple[int, ...], rhs: tuple[int, ...],
                                           dims: xm.DotDimensionNumbers) -> None:
    x, y = _rand(lhs, 0), _rand(rhs, 1)
    got = xm.compile(_dot(lhs, rhs, dims))(x, y)
    np.testing.assert_allclose(got, _expected(x, y, dims), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [(0, 64, 64, 64), (4, 0, 64, 64), (4, 64, 0, 64), (4, 64, 64, 0)])
def test_zero_size_batched_dot(shape: tuple[int, int, int, int]) -> None:
    batch, m, k, n = shape
    exe = xm.compile(_bmm(batch, m, k, n))
    got = exe(np.ones((batch, m, k), np.float32), np.ones((batch, k, n), np.float32))
    np.testing.assert_array_equal(got, np.zeros((batch, m, n), np.float32))


@pytest.mark.parametrize("dtype", [np.float64, np.dtype(ml_dtypes.bfloat16), np.float16, np.int32,
                                   np.int8, np.complex64, np.complex128])
def test_batched_dot_of_every_type(dtype: np.dtype) -> None:
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(5)
    shape_l, shape_r = (3, 40, 72), (3, 72, 40)
    lhs = rng.integers(-4, 5, shape_l).astype(dtype)
    rhs = rng.integers(-4, 5, shape_r).astype(dtype)
    if dtype.kind == "c":
        lhs = lhs + 1j * rng.integers(-4, 5, shape_l).astype(dtype)
    exe = xm.compile(_bmm(3, 40, 72, 40, dtype))
    # Small integers: every sum is exact in every type (bf16 and f16 round once at the end).
    expected = lhs.astype(np.complex128) @ rhs.astype(np.complex128)
    expected = (expected if dtype.kind == "c" else expected.real).astype(dtype)
    np.testing.assert_array_equal(exe(lhs, rhs), expected)


def test_transposed_b_panels_are_one_shuffle() -> None:
    # Q K^T reads B transposed: each [32, 8] step of its packing is one 256-lane shuffle
    # (vector.transpose lowered "shuffle_1d" in the schedule), not 256 element extracts
    # and inserts, which LLVM took ~10% of attention's compile to put back together.
    p = schedules.Params(threads=2, mr=8, nr=32)
    exe = xm.compile(_dot((2, 4, 128, 64), (2, 4, 128, 64), QK), _PIPELINES[str(p)])
    tiled = exe.stages["tiled"]
    assert "vector.transpose" not in tiled
    check_ir(tiled, """
        CHECK: vector.transfer_read {{.*}} vector<32x8xf32>
        CHECK: vector.shape_cast {{.*}} vector<32x8xf32> to vector<256xf32>
        CHECK: vector.shuffle {{.*}} : vector<256xf32>, vector<256xf32>
        CHECK: vector.shape_cast {{.*}} vector<256xf32> to vector<8x32xf32>
    """)
    assert exe.stages["llvm"].count("llvm.extractelement") < 32
