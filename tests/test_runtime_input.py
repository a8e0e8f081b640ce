"""Runtime input hardening: whatever numpy can hand an executable either works correctly
or raises xm.ArgumentError before native code runs.

tests/test_runtime.py has the basic argument errors (count, dtype, shape, non-arrays,
Python scalars) and a few strided views; this adds random views (negative and zero
strides, steps, transposes, byte offsets that break alignment, read-only buffers,
strides that are not a multiple of the item size) for every element type through
elementwise, reduction, dot and gather code, tuple parameters of such views, and
checks that a rejected call never reached the compiled code.
"""

from __future__ import annotations

import functools
import mmap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import xlamlir as xm

S = xm.Shape.parse
DIMS = (5, 7)
TYPES = [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint32, np.float16,
         ml_dtypes.bfloat16, np.complex64, np.complex128, np.bool_]


def _build(name: str, shapes: list[xm.Shape], body) -> xm.Executable:
    b = xm.XlaBuilder(name)
    ps = [b.parameter(i, s) for i, s in enumerate(shapes)]
    return xm.compile(b.build(body(b, *ps)))


@functools.cache
def elementwise(dtype: type) -> xm.Executable:
    """x op y, elementwise, on DIMS (a vectorized loop for the wide types)."""
    shape = xm.Shape.array(dtype, DIMS)
    if np.dtype(dtype) == np.bool_:
        return _build("ew_pred", [shape, shape], lambda b, x, y: b.xor(x, y))
    return _build(f"ew_{np.dtype(dtype).name}", [shape, shape], lambda b, x, y: b.sub(b.add(x, x), y))


def expected_elementwise(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype == np.bool_:
        return x ^ y
    with np.errstate(all="ignore"):
        return (x + x) - y


@functools.cache
def reduction() -> xm.Executable:
    return _build("red", [S("f32[5,7]")], lambda b, x: b.reduce(
        x, b.constant(np.float32(0)), lambda p, q: p + q, [1]))


@functools.cache
def dot() -> xm.Executable:
    return _build("dot", [S("f64[5,7]"), S("f64[7,3]")], lambda b, x, y: b.dot(x, y))


@functools.cache
def gather() -> xm.Executable:
    dn = xm.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                                   index_vector_dim=1)
    return _build("gat", [S("s32[5,7]"), S("s32[4,1]")],
                  lambda b, x, i: b.gather(x, i, dn, (1, 7)))


def values(dtype: type, dims: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(dims) < 0.5
    raw = rng.integers(-20, 20, dims)
    if dt.kind == "u":
        raw = np.abs(raw)
    if dt.kind == "c":
        return (raw + 1j * rng.integers(-20, 20, dims)).astype(dt)
    return raw.astype(dt)


# ---- views ----------------------------------------------------------------------------------------


def misaligned(a: np.ndarray, offset: int = 1) -> np.ndarray:
    """A copy of `a` whose data starts `offset` bytes past an aligned address."""
    buf = np.zeros(a.nbytes + 64, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@st.composite
def views(draw, dtype: type, dims: tuple[int, ...] = DIMS) -> np.ndarray:
    """An array equal to values(dtype, dims) in any memory arrangement numpy allows."""
    want = values(dtype, dims, draw(st.integers(0, 3)))
    kind = draw(st.sampled_from(["contiguous", "fortran", "step", "negative", "transposed",
                                 "misaligned", "misaligned-strided", "odd-stride", "readonly",
                                 "broadcast", "mmap"]))
    if kind == "contiguous":
        a = want.copy()
    elif kind == "fortran":
        a = np.asfortranarray(want)
    elif kind in ("step", "negative"):
        steps = [draw(st.sampled_from([1, 2, 3])) for _ in dims]
        if kind == "negative":
            steps = [-s if draw(st.booleans()) else s for s in steps]
            steps[0] = -abs(steps[0])
        base = np.zeros([d * abs(s) for d, s in zip(dims, steps)], want.dtype)
        a = base[tuple(slice(None, None, s) for s in steps)][tuple(slice(0, d) for d in dims)]
        a[...] = want
    elif kind == "transposed":
        a = want.T.copy().T
    elif kind == "misaligned":
        a = misaligned(want, draw(st.integers(1, 7)))
    elif kind == "misaligned-strided":
        a = misaligned(np.repeat(want, 2, axis=1), draw(st.integers(1, 7)))[:, ::-2][:, ::-1]
    elif kind == "odd-stride":  # a structured field: its stride is no multiple of the item size
        rec = np.zeros(dims, dtype=[("pad", np.uint8), ("v", want.dtype)])
        rec["v"] = want
        a = rec["v"]
    elif kind == "readonly":
        a = want.copy()
        a.flags.writeable = False
    elif kind == "broadcast":  # zero strides: one row repeated
        want = np.broadcast_to(want[:1], dims)
        a = np.broadcast_to(want[:1].copy(), dims)
    else:  # a read-only memory map
        m = mmap.mmap(-1, max(want.nbytes, 1))
        m[:want.nbytes] = want.tobytes()
        a = np.frombuffer(m, want.dtype, count=want.size).reshape(dims)
        a.flags.writeable = False
    assert a.shape == want.shape and a.dtype == want.dtype
    np.testing.assert_array_equal(a, want)
    return a


RUNS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])


@RUNS
@given(st.data())
def test_any_view_of_any_type_runs_elementwise(data) -> None:
    dtype = data.draw(st.sampled_from(TYPES))
    x = data.draw(views(dtype))
    y = data.draw(views(dtype))
    before = (x.copy(), y.copy())
    result = elementwise(dtype)(x, y)
    np.testing.assert_array_equal(result, expected_elementwise(before[0], before[1]))
    np.testing.assert_array_equal(x, before[0])  # inputs are never written
    assert result.flags.c_contiguous and result.flags.writeable and result.flags.aligned


@settings(RUNS, max_examples=30)
@given(st.data())
def test_any_view_runs_reductions_dots_and_gathers(data) -> None:
    x = data.draw(views(np.float32))
    np.testing.assert_array_equal(reduction()(x), x.astype(np.float64).sum(1).astype(np.float32))
    lhs = data.draw(views(np.float64))
    rhs = data.draw(views(np.float64, (7, 3)))
    np.testing.assert_allclose(dot()(lhs, rhs), lhs @ rhs)
    table = data.draw(views(np.int32))
    idx = data.draw(views(np.int32, (4, 1)))
    clamped = np.clip(idx[:, 0], 0, 4)
    np.testing.assert_array_equal(gather()(table, idx), table[clamped])


@pytest.mark.parametrize("dtype", TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("offset", [1, 3], ids=["off1", "off3"])
def test_misaligned_arrays(dtype, offset) -> None:
    x = misaligned(values(dtype, DIMS, 1), offset)
    y = misaligned(values(dtype, DIMS, 2), offset + 1)
    assert not x.flags.aligned or np.dtype(dtype).itemsize == 1
    np.testing.assert_array_equal(elementwise(dtype)(x, y), expected_elementwise(x, y))


@pytest.mark.parametrize("dims", [(0, 7), (5, 0), (0, 0)], ids=str)
def test_zero_size_views(dims) -> None:
    exe = _build("zs", [xm.Shape.array(xm.F32, dims)] * 2, lambda b, x, y: b.sub(b.add(x, x), y))
    base = np.zeros((6, 8), np.float32)
    for x in [np.zeros(dims, np.float32), base[::-1][:dims[0], :dims[1]],
              misaligned(np.zeros(dims, np.float32))]:
        assert exe(x, x).shape == dims


def test_tuple_parameter_of_views() -> None:
    exe = _build("tup", [S("(f32[5,7], (s32[5,7], c64[5,7]))")], lambda b, t: b.tuple([
        b.get_tuple_element(t, 0), b.get_tuple_element(b.get_tuple_element(t, 1), 0)]))
    f = misaligned(values(np.float32, DIMS))[::-1]
    i = np.asfortranarray(values(np.int32, DIMS))
    c = values(np.complex64, DIMS)
    c.flags.writeable = False
    out = exe((f, (i, c)))
    np.testing.assert_array_equal(out[0], f)
    np.testing.assert_array_equal(out[1], i)


class Sub(np.ndarray):
    """An ndarray subclass (its data is used as that of a plain array)."""


def test_ndarray_subclass_is_accepted() -> None:
    x = values(np.float32, DIMS).view(Sub)
    np.testing.assert_array_equal(elementwise(np.float32)(x, x), np.asarray(x))


# ---- rejected before native code runs ------------------------------------------------------------


@pytest.mark.parametrize("value", [
    values(np.float32, DIMS).astype(">f4"),  # byte-swapped
    np.zeros(DIMS, object),
    np.zeros(DIMS, "U1"),
    np.zeros(DIMS, [("a", np.float32)]),
    np.zeros(DIMS, "datetime64[s]"),
    np.zeros(DIMS, np.float32).view(np.int32),
    np.zeros((7, 5), np.float32),
    np.zeros(DIMS, np.float32)[None],
    np.zeros(DIMS, np.float32)[..., None],
    np.zeros(DIMS, np.float64).view(Sub),
    memoryview(np.zeros(DIMS, np.float32)),
    bytearray(140),
    np.zeros(DIMS, np.float32).tolist(),
    np.float32(1.0),
    1.0,
    None,
    (np.zeros(DIMS, np.float32),),
], ids=["byteswapped", "object", "str", "structured", "datetime", "int32-view", "wrong-shape",
        "extra-leading-dim", "extra-trailing-dim", "subclass-f64", "memoryview", "bytearray",
        "list", "numpy-scalar", "python-float", "none", "tuple"])
def test_rejected_arguments(value) -> None:
    with pytest.raises(xm.ArgumentError, match="argument 0"):
        elementwise(np.float32)(value, np.zeros(DIMS, np.float32))


def test_rejected_call_never_runs_the_code() -> None:
    calls = []

    def target(x):
        calls.append(1)
        return x

    xm.register_custom_call("runtime_input_probe", target)
    b = xm.XlaBuilder("probe")
    x = b.parameter(0, S("f32[3]"))
    b.parameter(1, S("s32[2]"))
    b.custom_call("runtime_input_probe", [x], S("f32[3]"), has_side_effect=True)
    exe = xm.compile(b.build())
    ok = np.zeros(3, np.float32)
    for bad in [(ok, np.zeros(2, np.int64)), (ok, np.zeros(3, np.int32)), (ok,), (ok, None),
                (ok.astype(np.float64), np.zeros(2, np.int32)), (ok, np.zeros(2, np.int32), 1)]:
        with pytest.raises(xm.ArgumentError):
            exe(*bad)
    assert calls == []
    exe(ok, np.zeros(2, np.int32))
    assert calls == [1]
