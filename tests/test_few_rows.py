"""A few rows (or a vector) times a matrix (lowering/ops/few_rows.py): W read in place,
each output one chain of fused multiply-adds in k order, the same bits on every target
and the matmul schedule's bits where that applies."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import stage_text

import xlamlir as xm
from xlamlir.lowering.ops import few_rows
from xlamlir.lowering.passes import schedules
from xlamlir.runtime.compiler import clear_cache

TYPES = {np.float32: xm.F32, np.float64: xm.F64}


def product(lhs: tuple[int, ...], rhs: tuple[int, int], dtype: type = np.float32) -> xm.XlaComputation:
    b = xm.XlaBuilder("few_rows")
    t = TYPES[dtype]
    b.dot(b.parameter(0, xm.Shape.array(t, lhs)), b.parameter(1, xm.Shape.array(t, rhs)))
    return b.build()


def operands(lhs: tuple[int, ...], rhs: tuple[int, int], dtype: type,
             seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal(lhs).astype(dtype), rng.standard_normal(rhs).astype(dtype)


SHAPES = [((512,), (512, 512)), ((1, 512), (512, 512)), ((2, 300), (300, 256)), ((3, 77), (77, 48)),
          ((4, 1000), (1000, 128)), ((1, 1), (1, 16)), ((4, 5), (5, 144)), ((33,), (33, 400))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_products_of_few_rows(dtype: type, shapes: tuple[tuple[int, ...], tuple[int, int]]) -> None:
    lhs, rhs = shapes
    a, w = operands(lhs, rhs, dtype)
    computation = product(lhs, rhs, dtype)
    linalg = stage_text(computation, "linalg")
    assert "vector.transfer_read" in linalg
    assert "linalg.matmul" not in linalg and "linalg.vecmat" not in linalg
    got = xm.compile(computation)(a, w)
    want = a.astype(np.float64) @ w.astype(np.float64)
    assert got.dtype == dtype and got.shape == want.shape
    tolerance = 1e-5 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance * np.abs(want).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((1, 512), (512, 512)), ((4, 1000), (1000, 128)),
                                    ((4, 512), (512, 512)), ((1, 1), (1, 16))], ids=str)
def test_the_same_bits_as_the_matmul_schedule(shapes: tuple[tuple[int, ...], tuple[int, int]],
                                              dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the schedule takes the product (f32 or f64, these shapes), its micro-kernel
    # makes each output the same chain of fused multiply-adds in k order.
    lhs, rhs = shapes
    a, w = operands(lhs, rhs, dtype, seed=1)
    view = np.uint32 if dtype == np.float32 else np.uint64
    clear_cache()
    mine = xm.compile(product(lhs, rhs, dtype))(a, w)
    monkeypatch.setattr(few_rows, "applies", lambda *_: False)
    clear_cache()
    schedule = xm.compile(product(lhs, rhs, dtype))
    assert "linalg.matmul" in schedule.stages["linalg"] or "vector.fma" not in schedule.stages["linalg"]
    np.testing.assert_array_equal(mine.view(view), schedule(a, w).view(view))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((512,), (512, 512)), ((2, 300), (300, 256)), ((3, 77), (77, 48)),
                                    ((33,), (33, 400))], ids=str)
def test_the_same_bits_as_the_generic_path(dtype: type, shapes: tuple[tuple[int, ...], tuple[int, int]],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # Products the schedule leaves (a vector lhs, f64, under its MIN_FLOPS): the linalg
    # op's multiply then add, in k order from zero.
    lhs, rhs = shapes
    a, w = operands(lhs, rhs, dtype, seed=3)
    view = np.uint32 if dtype == np.float32 else np.uint64
    clear_cache()
    mine = xm.compile(product(lhs, rhs, dtype))
    assert "vector.fma" not in mine.stages["linalg"]
    monkeypatch.setattr(few_rows, "applies", lambda *_: False)
    clear_cache()
    generic = xm.compile(product(lhs, rhs, dtype))
    np.testing.assert_array_equal(mine(a, w).view(view), generic(a, w).view(view))


def test_the_schedule_threshold_is_the_schedules() -> None:
    assert few_rows.SCHEDULE_MIN_FLOPS == schedules.MIN_FLOPS


@pytest.mark.parametrize("target", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
def test_the_same_bits_on_every_target(target: str) -> None:
    from xlamlir.runtime.targets import resolve

    try:
        resolve(target)
    except xm.ArgumentError:
        pytest.skip(f"this machine cannot run {target}")
    for lhs, rhs in [((3, 200), (200, 160)), ((700,), (700, 48)), ((1, 512), (512, 512))]:
        a, w = operands(lhs, rhs, np.float32, seed=2)
        clear_cache()
        host = xm.compile(product(lhs, rhs))(a, w)
        clear_cache()
        other = xm.compile(product(lhs, rhs), target_cpu=target)(a, w)
        np.testing.assert_array_equal(host.view(np.uint32), other.view(np.uint32))


def test_special_values_and_a_single_column_vector() -> None:
    # NaN, inf and -0.0 propagate as a chain of fma does: inf * 0 is NaN, -0.0 * x + 0.0.
    a = np.array([[np.inf, 0.0, 1.0], [-0.0, np.nan, 2.0]], np.float32)
    w = np.ones((3, 16), np.float32)
    w[0, 1] = 0.0
    w[1, 2] = -1.0
    got = xm.compile(product(a.shape, w.shape))(a, w)
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_array_equal(got, want.astype(np.float32))
    assert np.isnan(got[0, 1]) and np.isnan(got[1]).all() and np.isinf(got[0, 0])


def test_more_rows_or_other_shapes_keep_their_paths() -> None:
    for lhs, rhs in [((5, 64), (64, 64)), ((2, 64), (64, 40))]:  # 5 rows; 40 columns
        assert "linalg.matmul" in stage_text(product(lhs, rhs), "linalg")
    b = xm.XlaBuilder("ints")
    b.dot(b.parameter(0, xm.Shape.array(xm.S32, (2, 8))), b.parameter(1, xm.Shape.array(xm.S32, (8, 32))))
    assert "linalg.matmul" in stage_text(b.build(), "linalg")


def test_w_is_read_a_block_of_rows_at_a_time() -> None:
    # x f32[1,1024] W f32[1024,1024]: two panels of 512 columns (2 KB of each row of W),
    # a loop over blocks of K_BLOCK rows, in it the panel's four groups, each carrying its
    # eight accumulators through the block's rows. (All of K per group, as before, read
    # 512 bytes of each 4 KB row: no hardware prefetcher followed.)
    linalg = stage_text(product((1, 1024), (1024, 1024)), "linalg")
    assert "scf.forall (%arg3) in (2)" in linalg
    blocks = f"scf.for %arg5 = %c0 to %c{1024 // few_rows.K_BLOCK} step %c1"
    groups = "scf.for %arg7 = %c0 to %c4 step %c1"
    assert blocks in linalg and groups in linalg.split(blocks, 1)[1]
    assert linalg.count("-> (vector<16xf32>, " + "vector<16xf32>, " * 6 + "vector<16xf32>)") == 1


@pytest.mark.parametrize("shapes", [((1, 1000), (1000, 48)), ((4, 33), (33, 400)), ((2, 17), (17, 2048))],
                         ids=str)
def test_partial_blocks_and_panels_keep_the_chain(shapes: tuple[tuple[int, ...], tuple[int, int]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # K not a multiple of the block, columns not a multiple of the panel or the group:
    # the same bits as one block of all of K per group (each output one chain in k order).
    lhs, rhs = shapes
    a, w = operands(lhs, rhs, np.float32, seed=4)
    a[0, :3] = [np.inf, -0.0, np.nan] if a.shape[1] >= 3 else a[0, :3]
    clear_cache()
    blocked = xm.compile(product(lhs, rhs))(a, w)
    monkeypatch.setattr(few_rows, "K_BLOCK", 1 << 20)
    monkeypatch.setattr(few_rows, "PANEL_BYTES", 64)
    clear_cache()
    whole = xm.compile(product(lhs, rhs))(a, w)
    np.testing.assert_array_equal(blocked.view(np.uint32), whole.view(np.uint32))
