"""Copies into or out of part of a buffer (lowering/passes/strided_copies.py): a slice, a
pad, a concatenation are vector loops split across cores, not MLIR's element-at-a-time
`memrefCopy`; a pad writes its border once (not a fill of everything, then the copy);
a returned concatenation is built in the output buffer (no temporary, no copy)."""

from __future__ import annotations

import numpy as np
import pytest

import xlamlir as xm

DTYPES = {"f32": (xm.F32, np.float32), "f64": (xm.F64, np.float64), "s8": (xm.S8, np.int8),
          "u16": (xm.U16, np.uint16), "pred": (xm.PRED, np.bool_), "c64": (xm.C64, np.complex64),
          "f16": (xm.F16, np.float16), "s64": (xm.S64, np.int64)}


def _data(shape: tuple[int, ...], dtype: type, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(0, 100, shape).astype(dtype)


def _compile(build: object, *shapes: tuple[tuple[int, ...], object]) -> xm.Executable:
    b = xm.XlaBuilder("copies")
    params = [b.parameter(i, xm.Shape.array(t, s)) for i, (s, t) in enumerate(shapes)]
    build(b, *params)
    return xm.compile(b.build())


def _no_memref_copy_call(exe: xm.Executable) -> None:
    assert "memrefCopy" not in exe.stages["llvm"]


@pytest.mark.parametrize("name", list(DTYPES))
@pytest.mark.parametrize(("shape", "start", "limit", "strides"), [
    ((300, 517), (7, 3), (290, 500), (1, 1)),      # rows of 497: 31 vectors and 1 lane
    ((64, 40, 33), (1, 2, 5), (60, 39, 30), (1, 1, 1)),
    ((100, 80), (3, 1), (97, 77), (2, 3)),         # strided reads
], ids=str)
def test_slices(name: str, shape: tuple[int, ...], start: tuple[int, ...], limit: tuple[int, ...],
                strides: tuple[int, ...]) -> None:
    element, dtype = DTYPES[name]
    exe = _compile(lambda b, x: b.slice(x, start, limit, strides), (shape, element))
    _no_memref_copy_call(exe)
    x = _data(shape, dtype)
    want = x[tuple(slice(s, e, k) for s, e, k in zip(start, limit, strides))]
    np.testing.assert_array_equal(exe(x), want)


def test_a_large_slice_is_vectorized_and_split_across_cores() -> None:
    exe = _compile(lambda b, x: b.slice(x, (100, 3), (1900, 2000), (1, 1)), ((2048, 2048), xm.F32))
    assert "scf.forall" in exe.stages["vectorized"] and "vector<16xf32>" in exe.stages["vectorized"]
    x = _data((2048, 2048), np.float32)
    np.testing.assert_array_equal(exe(x), x[100:1900, 3:2000])


def test_a_convolutions_padded_input_is_a_vector_copy() -> None:
    """The interior of a convolution's padded input (a linalg.copy after bufferization)
    is the vectorized copy generic, not the affine path's scalar nest (which LLVM
    vectorized itself, at ~20 ms of JIT time for this convolution)."""
    b = xm.XlaBuilder("conv")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 12, 12, 16)))
    k = b.parameter(1, xm.Shape.array(xm.F32, (3, 3, 16, 32)))
    b.conv_general_dilated(x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    exe = xm.compile(b.build())
    assert "linalg.copy" in exe.stages["tiled"]
    assert "linalg.copy" not in exe.stages["bufferized"]
    assert ("ins(%arg0 : memref<2x12x12x16xf32>) outs(%subview : memref<2x12x12x16xf32, "
            "strided<[3136, 224, 16, 1], offset: 240>>)") in exe.stages["bufferized"]
    assert "vector<16xf32>, memref<1x1x1x16xf32, strided<[3136, 224, 1" in exe.stages["vectorized"]
    rng = np.random.default_rng(3)
    xs, ks = rng.standard_normal((2, 12, 12, 16), np.float32), rng.standard_normal((3, 3, 16, 32), np.float32)
    padded = np.pad(xs.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = sum(np.einsum("nhwc,cf->nhwf", padded[:, i:i + 12, j:j + 12], ks[i, j])
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(exe(xs, ks), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["f32", "f64", "s8", "pred", "c64"])
@pytest.mark.parametrize("config", [
    [(1, 1, 0), (1, 1, 0)], [(0, 3, 0), (5, 0, 0)], [(2, 0, 0), (0, 0, 0)], [(0, 0, 0), (0, 17, 0)],
    [(1, 2, 1), (0, 1, 2)],             # interior padding: a strided copy, the whole fill
    [(-2, 3, 0), (4, -1, 0)],           # negative padding crops
], ids=str)
def test_pads(name: str, config: list[tuple[int, int, int]]) -> None:
    element, dtype = DTYPES[name]
    value = _data((), dtype, 1)
    exe = _compile(lambda b, x: b.pad(x, b.constant(value), config), ((37, 45), element))
    _no_memref_copy_call(exe)
    x = _data((37, 45), dtype)
    got = exe(x)
    # numpy: interior-dilate, then edge-pad (crop where negative).
    dilated = np.full([(n - 1) * (i + 1) + 1 for n, (_, _, i) in zip(x.shape, config)], value, dtype)
    dilated[tuple(slice(None, None, i + 1) for _, _, i in config)] = x
    padded = np.pad(dilated, [(max(lo, 0), max(hi, 0)) for lo, hi, _ in config], constant_values=value)
    want = padded[tuple(slice(max(-lo, 0), padded.shape[d] - max(-hi, 0))
                        for d, (lo, hi, _) in enumerate(config))]
    np.testing.assert_array_equal(got, want)


def test_a_pad_fills_only_its_border() -> None:
    exe = _compile(lambda b, x: b.pad(x, b.constant(np.float32(7)), [(1, 2, 0), (3, 1, 0), (0, 4, 0)]),
                   ((20, 30, 40), xm.F32))
    bufferized = exe.stages["bufferized"]
    # 5 slabs (the third dimension has no low border) and no fill of the whole result.
    assert bufferized.count("linalg.fill") == 5
    assert "outs(%arg1 : memref<23x34x44xf32>)" not in bufferized
    x = _data((20, 30, 40), np.float32)
    np.testing.assert_array_equal(exe(x), np.pad(x, [(1, 2), (3, 1), (0, 4)], constant_values=7))


def test_a_pad_inside_a_computation() -> None:
    # The padded value is a temporary read by an add: its border fill and copy too.
    def build(b: xm.XlaBuilder, x: xm.XlaOp, y: xm.XlaOp) -> None:
        b.add(b.pad(b.mul(x, x), b.constant(np.float32(-1)), [(2, 1, 0), (0, 3, 0)]), y)

    exe = _compile(build, ((61, 70), xm.F32), ((64, 73), xm.F32))
    x, y = _data((61, 70), np.float32), _data((64, 73), np.float32, 2)
    np.testing.assert_array_equal(exe(x, y), np.pad(x * x, [(2, 1), (0, 3)], constant_values=-1) + y)


@pytest.mark.parametrize("dimension", [0, 1, 2])
def test_a_returned_concatenation_is_built_in_the_output(dimension: int) -> None:
    shapes = [[5, 6, 7] for _ in range(3)]
    for k, shape in enumerate(shapes):
        shape[dimension] += 2 * k
    exe = _compile(lambda b, *xs: b.concat_in_dim(list(xs), dimension),
                   *[(tuple(s), xm.F32) for s in shapes])
    assert "memref.alloc" not in exe.stages["bufferized"]
    _no_memref_copy_call(exe)
    xs = [_data(tuple(s), np.float32, k) for k, s in enumerate(shapes)]
    np.testing.assert_array_equal(exe(*xs), np.concatenate(xs, dimension))


def test_a_concatenation_read_twice_and_with_empty_operands() -> None:
    def build(b: xm.XlaBuilder, x: xm.XlaOp, e: xm.XlaOp, y: xm.XlaOp) -> None:
        c = b.concat_in_dim([x, e, y, e], 1)
        b.tuple([c, b.mul(c, c)])

    exe = _compile(build, ((4, 3), xm.S32), ((4, 0), xm.S32), ((4, 5), xm.S32))
    x, e, y = _data((4, 3), np.int32), _data((4, 0), np.int32), _data((4, 5), np.int32, 1)
    c = np.concatenate([x, y], 1)
    got = exe(x, e, y)
    np.testing.assert_array_equal(got[0], c)
    np.testing.assert_array_equal(got[1], c * c)


def test_column_major_parameter_returned_in_a_tuple() -> None:
    b = xm.XlaBuilder("layouts")
    x = b.parameter(0, xm.Shape.array(xm.F64, (33, 50), (0, 1)))
    b.tuple([x, b.add(x, x)])
    exe = xm.compile(b.build())
    _no_memref_copy_call(exe)
    data = np.asfortranarray(_data((33, 50), np.float64))
    first, second = exe(data)
    np.testing.assert_array_equal(first, data)
    np.testing.assert_array_equal(second, 2 * data)
