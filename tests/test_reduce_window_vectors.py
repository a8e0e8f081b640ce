"""reduce_window as vector loops along the minor dimension (lowering/ops/window_vectors.py).

Pooling-shaped windows (the minor dimension outside the window) with each combiner the
module spells for vectors, either operand order, every type it takes, padding read as
the init value (also a non-identity init), window dilations, windows over the batch
dimension, masked last vectors. The results must be those of the window generic
(lowering/ops/reduce.py, forced by switching the vector path off), bit for bit (the sign
of zero included) but for which NaN an add or multiply of two NaNs returns; max and min
are also compared bit for bit with the definition (the first NaN operand, quieted).
Then the IR, and what stays on the generic.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import check_ir, stage_text
from test_reduce import ref_reduce_window

import xlamlir as xm
from xlamlir.lowering.ops import window_vectors

FLOATS = [np.float32, np.float64]
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
# (window, strides, window dilations, padding) on an NHWC operand
CASES = [
    ((1, 2, 2, 1), (1, 2, 2, 1), None, None),  # 2x2/2 max-pool
    ((1, 3, 3, 1), (1, 2, 2, 1), None, ((0, 0), (1, 1), (0, 1), (0, 0))),  # 3x3/2 padded
    ((1, 3, 2, 1), (1, 1, 1, 1), (1, 2, 3, 1), ((0, 0), (2, 0), (0, 3), (0, 0))),  # dilated
    ((2, 2, 1, 1), (1, 1, 2, 1), None, ((1, 0), (0, 0), (0, 0), (0, 0))),  # over the batch too
]
COMBINERS = {
    "max": lambda a, x: a.builder.max(a, x),
    "max(x, acc)": lambda a, x: a.builder.max(x, a),
    "min": lambda a, x: a.builder.min(a, x),
    "add": lambda a, x: a + x,
    "mul(x, acc)": lambda a, x: x * a,
}


def _floats(shape: tuple[int, ...], dtype, seed: int) -> np.ndarray:
    """Normal values with NaNs of several payloads and signs, +-0 and +-inf sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    bits = x.view(f"u{x.itemsize}").reshape(-1)
    sign = 1 << (8 * x.itemsize - 1)
    quiet = (0x7FC00000 if x.itemsize == 4 else 0x7FF8000000000000)
    specials = [quiet | 1, quiet | 5 | sign, quiet, 0, sign,
                (0x7F800000 if x.itemsize == 4 else 0x7FF0000000000000)]
    specials.append(specials[-1] | sign)
    where = rng.choice(bits.size, 40, replace=False)
    bits[where] = np.array(specials, dtype=bits.dtype)[np.arange(40) % len(specials)]
    # Equal neighbours decide by the sign of zero: whole runs of +-0.
    bits[:8] = np.array([0, sign] * 4, dtype=bits.dtype)
    return x


def _ints(shape: tuple[int, ...], dtype, seed: int) -> np.ndarray:
    info = np.iinfo(dtype)
    x = np.random.default_rng(seed).integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    x.reshape(-1)[:4] = [info.min, info.max, 0, 1]  # extremes: products and sums wrap
    return x


def _pool(x: np.ndarray, init, fn, window, strides, wdil, padding) -> xm.XlaComputation:
    b = xm.XlaBuilder("pool")
    p = b.parameter(0, xm.Shape.array(xm.type_of(x.dtype), x.shape))
    b.reduce_window(p, b.constant(np.asarray(init, x.dtype)), fn, list(window), list(strides),
                    window_dilations=wdil and list(wdil), padding=padding and list(padding))
    return b.build()


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.itemsize}")


def _both(comp: xm.XlaComputation, x: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> tuple:
    """(vector path, window generic) results."""
    xm.runtime.clear_cache()
    vectors = xm.compile(comp)
    assert "vector.transfer_read" in vectors.stages["linalg"], "the vector path did not apply"
    got = vectors(x)
    with monkeypatch.context() as m:
        m.setattr(window_vectors, "MAX_UNROLLED_CELLS", 0)  # every window too large: generic
        xm.runtime.clear_cache()
        generic = xm.compile(comp)
        assert "vector.transfer_read" not in generic.stages["linalg"]
        want = generic(x)
    xm.runtime.clear_cache()
    return got, want


def _extremum(name: str, dtype):
    """XLA's max / min of (a, b) on float scalars, bit-exact: the first NaN operand,
    quieted; equal values by and / or of the bits (max(+0, -0) = +0, min = -0)."""
    u = np.dtype(f"u{np.dtype(dtype).itemsize}")
    quiet = u.type(1 << (np.finfo(dtype).nmant - 1))

    def fn(a, b):
        if np.isnan(a) or np.isnan(b):
            n = a if np.isnan(a) else b
            return (np.asarray(n).view(u) | quiet).view(dtype)[()]
        if a == b:
            join = np.bitwise_and if name == "max" else np.bitwise_or
            return join(np.asarray(a).view(u), np.asarray(b).view(u)).view(dtype)[()]
        return (a if a > b else b) if name == "max" else (a if a < b else b)
    return fn


def _assert_same_floats(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """The same NaNs and the same bits elsewhere. (Which NaN operand the generic's
    `x + y` propagates is LLVM's choice for add and mul: payloads compared separately.)"""
    nan = np.isnan(got)
    np.testing.assert_array_equal(nan, np.isnan(want), err_msg=what)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan], err_msg=what)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("combiner", list(COMBINERS))
def test_floats_same_bits_as_the_generic(dtype, combiner: str, monkeypatch) -> None:
    x = _floats((2, 7, 9, 40), dtype, seed=len(combiner))  # 40: a masked last vector
    inits = {"max": -np.inf, "min": np.inf, "add": -0.0, "mul": 1.0}
    init = inits[combiner[:3]]
    for case in CASES:
        got, want = _both(_pool(x, init, COMBINERS[combiner], *case), x, monkeypatch)
        _assert_same_floats(got, want, f"{combiner} {case}")
        if combiner[:3] in ("max", "min"):  # every bit, NaN payloads too
            extremum = _extremum(combiner[:3], dtype)
            fn = (lambda a, v: extremum(v, a)) if "(x, acc)" in combiner else extremum
            window, strides, wdil, padding = case
            ref = ref_reduce_window(x, dtype(init), fn, window, strides, wdil=wdil, padding=padding)
            np.testing.assert_array_equal(_bits(got), _bits(ref), err_msg=f"{combiner} {case}")


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integers_same_as_the_generic_and_reference(dtype, monkeypatch) -> None:
    x = _ints((2, 6, 7, 33), dtype, seed=3)
    info = np.iinfo(dtype)
    for name, init, np_fn in (("max", info.min, max), ("min", info.max, min), ("add", 0, None),
                              ("mul(x, acc)", 1, None)):
        for case in CASES[:2]:
            got, want = _both(_pool(x, init, COMBINERS[name], *case), x, monkeypatch)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {case}")
            if np_fn is not None:
                window, strides, wdil, padding = case
                ref = ref_reduce_window(x, dtype(init), np_fn, window, strides, wdil=wdil, padding=padding)
                np.testing.assert_array_equal(got, ref)


def test_padding_reads_the_init_value(monkeypatch) -> None:
    """max with init 0.5 is not an identity: every window touching padding is at least 0.5,
    as the seeds' definition (padding cells hold the init value) says."""
    x = -np.abs(_floats((1, 5, 6, 16), np.float32, seed=9))
    x[np.isnan(x)] = -1.0
    case = ((1, 3, 3, 1), (1, 2, 2, 1), None, ((0, 0), (1, 1), (1, 1), (0, 0)))
    got, want = _both(_pool(x, 0.5, COMBINERS["max"], *case), x, monkeypatch)
    _assert_same_floats(got, want, "init 0.5")
    ref = ref_reduce_window(x, np.float32(0.5), max, case[0], case[1], padding=case[3])
    np.testing.assert_array_equal(got, ref)


def test_batch_of_one_splits_the_rows(monkeypatch) -> None:
    """With one image the cores take output rows (the first dimension larger than 1)."""
    x = _floats((1, 9, 11, 24), np.float32, seed=4)
    for case in CASES[:3]:
        comp = _pool(x, -np.inf, COMBINERS["max"], *case)
        got, want = _both(comp, x, monkeypatch)
        _assert_same_floats(got, want, str(case))
        window, strides, wdil, padding = case
        ref = ref_reduce_window(x, np.float32(-np.inf), _extremum("max", np.float32), window, strides,
                                wdil=wdil, padding=padding)
        np.testing.assert_array_equal(_bits(got), _bits(ref), err_msg=str(case))
    rows = (9 - 3 + 2) // 2 + 1
    check_ir(stage_text(_pool(x, -np.inf, COMBINERS["max"], *CASES[1]), "linalg"), f"""
        CHECK: scf.forall (%{{{{.*}}}}) in ({rows})
        CHECK: tensor.parallel_insert_slice {{{{.*}}}} tensor<1x1x{(11 - 3 + 1) // 2 + 1}x24xf32>
    """)


def test_ir_vector_loop_over_the_channels() -> None:
    x = np.zeros((8, 12, 12, 64), np.float32)
    text = stage_text(_pool(x, -np.inf, COMBINERS["max"], (1, 3, 3, 1), (1, 2, 2, 1), None,
                            ((0, 0), (0, 1), (0, 1), (0, 0))), "linalg")
    # Images across the cores; per output pixel, 16 channels at a time: the 9 window cells
    # read as vectors (padding cells replaced by the init vector) and folded in order.
    check_ir(text, """
        CHECK-NOT: linalg.generic
        CHECK: scf.forall (%[[N:.*]]) in (8)
        CHECK: scf.for
        CHECK: scf.for
        CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %c16
        CHECK-COUNT-9: vector.transfer_read {{.*}} : tensor<8x12x12x64xf32>, vector<16xf32>
        CHECK: arith.cmpf uno, {{.*}} : vector<16xf32>
        CHECK: vector.transfer_write {{.*}} : vector<16xf32>, tensor<1x6x6x64xf32>
        CHECK: tensor.parallel_insert_slice
    """)


@pytest.mark.parametrize("window, strides, dtype, fn", [
    ((2, 2), (2, 2), np.float32, "max"),  # the minor dimension is windowed
    ((1, 1, 2, 1), (1, 1, 2, 1), np.float32, "sub"),  # not a combiner spelled for vectors
    ((1, 2, 2, 1), (1, 2, 2, 1), np.float16, "max"),  # f16: soft-float scalar code
    ((1, 2, 2, 1), (1, 2, 2, 1), np.complex64, "add"),
])
def test_other_windows_keep_the_generic(window, strides, dtype, fn) -> None:
    x = np.zeros((2, 4, 6, 32)[-len(window):], dtype)
    combine = {"max": COMBINERS["max"], "add": COMBINERS["add"], "sub": lambda a, v: a - v}[fn]
    text = stage_text(_pool(x, 0, combine, window, strides, None, None), "linalg")
    check_ir(text, """
        CHECK: linalg.generic
        CHECK-NOT: vector.transfer_read
    """)
