"""scan (seed: Scan): to_apply(elements..., carries...) -> (outputs..., carries...) step by step
along scan_dimension, against a numpy loop and the reference interpreter (tests/reference.py)."""

from __future__ import annotations

import numpy as np
import pytest
import reference
from conftest import param_shape, run

import xlamlir as xm


def shape(dtype, dims=()) -> xm.Shape:
    return param_shape(np.zeros(dims, dtype))


def numpy_scan(fn, inputs, inits, dim, reverse=False):
    """The seed's loop: step i applies fn to element i of every input and the carries."""
    steps = inputs[0].shape[dim]
    carries, rows = list(inits), {}
    for i in (reversed(range(steps)) if reverse else range(steps)):
        result = fn(*[np.take(x, i, axis=dim) for x in inputs], *carries)
        n = len(result) - len(carries)
        rows[i], carries = result[:n], list(result[n:])
    return [np.stack([rows[i][j] for i in range(steps)], axis=dim)
            for j in range(len(rows[0]))] if steps else [], carries


def build_scan(inputs, inits, body, dim, reverse=False, associative=None):
    b = xm.XlaBuilder("scan")
    xs = [b.parameter(i, shape(x.dtype, x.shape)) for i, x in enumerate(inputs)]
    cs = [b.parameter(len(xs) + i, shape(c.dtype, c.shape)) for i, c in enumerate(inits)]
    b.scan(xs, cs, body, dim, reverse, associative)
    return b.build()


def check(comp, inputs, inits, expected_outputs, expected_carries):
    got = run(comp, *inputs, *inits)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    want = [*expected_outputs, *expected_carries]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    oracle = reference.evaluate(comp, [*inputs, *inits])
    for o, w in zip(oracle, want):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(w))


def test_seed_example():
    # Seed: inputs [a, b, c], initial carry i, f(x, c) -> (y, c'), scan_dimension=0, forward:
    # f(a, i) -> (y0, c0), f(b, c0) -> (y1, c1), f(c, c1) -> (y2, c2); the result ([y0, y1, y2], c2).
    # Here f(x, c) = (x + c, x * c), [a, b, c] = [2, 3, 5], i = 1.
    comp = build_scan([np.float32([2, 3, 5])], [np.float32(1)],
                      lambda x, c: (x + c, x * c), 0)
    y, c2 = run(comp, np.float32([2, 3, 5]), np.float32(1))
    np.testing.assert_array_equal(y, np.float32([3, 5, 11]))  # y0 = 2+1, y1 = 3+2, y2 = 5+6
    assert c2 == np.float32(30)  # c0 = 2, c1 = 6, c2 = 30
    assert c2.shape == () and y.dtype == np.float32


@pytest.mark.parametrize("reverse", [False, True])
def test_carries_and_outputs_of_several_types(reverse):
    """An f32 input; carries s32 (a counter), f64 (a running sum), u8 (wrapping), pred (a
    parity flag); outputs s32, f64 and pred."""
    def body(x, count, total, wrap, odd):
        b = x.builder
        new_total = total + b.convert_element_type(x, xm.F64)
        return (count, new_total, odd,
                count + np.int32(1), new_total, wrap + np.uint8(100), b.not_(odd))

    def ref(x, count, total, wrap, odd):
        new_total = total + np.float64(x)
        return (count, new_total, odd, np.int32(count + 1), new_total,
                np.uint8((int(wrap) + 100) % 256), np.bool_(not odd))

    x = np.float32([0.5, -1.25, 3, 1e-3, 7])
    inits = [np.int32(10), np.float64(0.125), np.uint8(250), np.bool_(False)]
    outs, carries = numpy_scan(ref, [x], inits, 0, reverse)
    check(build_scan([x], inits, body, 0, reverse), [x], inits, outs,
          [np.asarray(c, i.dtype) for c, i in zip(carries, inits)])


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 1, 2])
def test_every_dimension_with_array_elements(dim, reverse):
    """Rank-3 inputs: each step's element is a rank-2 slice, the carry a rank-2 array; the
    outputs are the running maximum, a reduction of the element broadcast back, and the
    element times the step's carry."""
    rng = np.random.default_rng(dim)
    x = rng.integers(-50, 50, (3, 4, 5)).astype(np.int32)
    w = rng.standard_normal((3, 4, 5)).astype(np.float32)
    element = np.take(x, 0, axis=dim).shape
    inits = [np.zeros(element, np.int32), np.ones(element, np.float32)]

    def body(xe, we, best, scale):
        b = xe.builder
        new_best = b.max(best, xe)
        total = b.broadcast_in_dim(b.reduce(xe, np.int32(0), lambda p, q: p + q, [1]),
                                   element, [0])
        return new_best, total, b.mul(scale, we), new_best, b.mul(scale, np.float32(0.5)) + we

    def ref(xe, we, best, scale):
        new_best = np.maximum(best, xe)
        total = np.broadcast_to(xe.sum(axis=1, dtype=np.int32)[:, None], element)
        return (new_best, total, (scale * we).astype(np.float32),
                new_best, (scale * np.float32(0.5) + we).astype(np.float32))

    outs, carries = numpy_scan(ref, [x, w], inits, dim, reverse)
    comp = build_scan([x, w], inits, body, dim, reverse)
    got = run(comp, x, w, *inits)
    want = [*outs, *carries]
    for g, o in zip(got, want):
        assert g.shape == o.shape and g.dtype == o.dtype
        np.testing.assert_allclose(g, o, rtol=1e-6)
    for o, w_ in zip(reference.evaluate(comp, [x, w, *inits]), want):
        np.testing.assert_allclose(np.asarray(o), w_, rtol=1e-6)


def test_output_stacked_along_a_later_dimension_of_a_larger_output():
    # Rank-1 input, element a scalar, output a vector: the steps stack along dim 0 of [N, 3].
    x = np.int64([4, -1, 9, 2])

    def body(e, c):
        b = e.builder
        return b.broadcast(e + c, [3]) * b.iota(xm.Shape.array(xm.S64, (3,)), 0), e + c

    outs, carries = numpy_scan(lambda e, c: ((e + c) * np.arange(3, dtype=np.int64),
                                             np.int64(e + c)), [x], [np.int64(1)], 0)
    check(build_scan([x], [np.int64(1)], body, 0), [x], [np.int64(1)], outs, carries)


@pytest.mark.parametrize("dims, dim", [((0,), 0), ((2, 0, 3), 1), ((0, 4), 0)])
def test_zero_length_scan_dimension(dims, dim):
    x = np.zeros(dims, np.float32)
    element = tuple(d for i, d in enumerate(dims) if i != dim)
    init = np.full(element, 2.5, np.float32)
    comp = build_scan([x], [init], lambda e, c: (e * c, c + e), dim)
    out, carry = run(comp, x, init)
    assert out.shape == dims and out.dtype == np.float32
    np.testing.assert_array_equal(carry, init)  # no step: the carry is its init


def test_empty_elements_still_take_every_step():
    # [0, 3] along dimension 1: three steps on empty elements; one carry counts them, the other
    # (empty) sums the elements. Found by the differential fuzzer: the slices of an empty input
    # were offset 0 into a dimension of size 0, which MLIR refuses.
    x = np.zeros((0, 3), np.float32)
    empty = np.zeros((0,), np.float32)
    comp = build_scan([x], [np.int32(0), empty], lambda e, c, acc: (e, c + np.int32(1), acc + e), 1)
    out, steps, total = run(comp, x, np.int32(0), empty)
    assert out.shape == (0, 3) and steps == 3 and total.shape == (0,)


@pytest.mark.parametrize("dims, dim", [((1, 7, 1), 2), ((1, 7, 1), 1), ((1, 1, 5), 2),
                                       ((2, 1, 1), 0), ((1, 1), 1)])
def test_size_one_dimensions_beside_the_scan_dimension(dims, dim):
    """Found by the differential fuzzer: a rank-reducing slice of [1, 7, 1] along dimension 2
    was ambiguous (which size-1 dimension goes?) and canonicalization dropped the wrong one."""
    x = np.arange(np.prod(dims), dtype=np.int8).reshape(dims)
    init = np.ones(np.take(x, 0, axis=dim).shape, np.int8)
    outs, carries = numpy_scan(lambda e, c: ((c + e).astype(np.int8),) * 2, [x], [init], dim, True)
    check(build_scan([x], [init], lambda e, c: (c + e,) * 2, dim, reverse=True), [x], [init],
          outs, carries)


def test_no_carries_and_no_outputs():
    x = np.float32([1, 2, 4])
    only_outputs = build_scan([x], [], lambda e: e * e, 0)
    (squares,) = run(only_outputs, x)
    np.testing.assert_array_equal(squares, x * x)
    fold_only = build_scan([x], [np.float32(0)], lambda e, c: (c * np.float32(2) + e,), 0)
    (folded,) = run(fold_only, x, np.float32(0))
    assert folded == np.float32(((0 * 2 + 1) * 2 + 2) * 2 + 4)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.uint32, np.int64, np.float16,
                                   "bfloat16", np.float64, np.bool_])
def test_element_types(dtype):
    import ml_dtypes
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    rng = np.random.default_rng(3)
    if dt == np.bool_:
        x = rng.integers(0, 2, 7).astype(bool)
        comp = build_scan([x], [np.bool_(True)], lambda e, c: (e.builder.xor(e, c),) * 2, 0)
        ref = np.logical_xor.accumulate(np.concatenate([[True], x]))[1:]
        out, carry = run(comp, x, np.bool_(True))
        np.testing.assert_array_equal(out, ref)
        assert carry == ref[-1]
        return
    x = (rng.integers(0, 100, 7) if dt.kind in "iu" else rng.standard_normal(7)).astype(dt)
    init = np.asarray(3, dt)
    comp = build_scan([x], [init], lambda e, c: (c + e,) * 2, 0)
    out, carry = run(comp, x, init)
    acc, want = init, []
    for e in x:
        # Integers wrap (computed in int64, then truncated), floats round once to dt.
        acc = ((np.int64(acc) + np.int64(e)) if dt.kind in "iu" else (acc + e)).astype(dt)
        want.append(acc)
    np.testing.assert_array_equal(out, np.array(want, dt))
    assert out.dtype == dt and carry == want[-1]


def test_the_sum_is_the_in_order_fold_bit_for_bit():
    """is_associative=true does not license a reassociated float sum: the steps run in order."""
    x = np.float32([1e8, 1, -1e8, 1, 1e-3] * 3)
    comp = build_scan([x], [np.float32(0)], lambda e, c: (c + e,) * 2, 0, associative=True)
    out, _ = run(comp, x, np.float32(0))
    acc, want = np.float32(0), []
    for e in x:
        acc = np.float32(acc + e)
        want.append(acc)
    np.testing.assert_array_equal(out, want)
    assert "is_associative=true" in comp.as_hlo_text()


def test_a_body_that_is_not_scalar_code_on_scalars():
    # The body reshapes its scalar to [1] and reduces it: no scalar form, so the tensor loop runs.
    x = np.int32([3, 1, 4, 1, 5])

    def body(e, c):
        b = e.builder
        v = b.reduce(b.reshape(e, [1]), np.int32(0), lambda p, q: p + q, [0])
        return c + v, c + v

    out, carry = run(build_scan([x], [np.int32(0)], body, 0), x, np.int32(0))
    np.testing.assert_array_equal(out, np.cumsum(x))
    assert carry == x.sum()


def test_hlo_text_and_stage():
    x = np.float32([1, 2])
    comp = build_scan([x], [np.float32(0)], lambda e, c: (c + e, c + e), 0, reverse=True)
    hlo = comp.as_hlo_text()
    assert "scan(" in hlo and "dimensions={0}" in hlo and "num_carries=1" in hlo, hlo
    assert "is_reverse=true" in hlo and "is_associative" not in hlo
    assert "xhlo.scan" in xm.compile(comp).stages["hlo"]


def test_a_long_scan_runs_in_linear_time_ir():
    """The outputs are loop-carried and updated in place: after bufferization the loop body
    copies one row, never the whole output (a copy per step would make the scan quadratic)."""
    n = 1 << 12
    x = np.arange(n, dtype=np.float32).reshape(n // 4, 4)
    comp = build_scan([x], [np.zeros(4, np.float32)], lambda e, c: (c + e, c + e), 0)
    exe = xm.compile(comp)
    out, carry = exe(x, np.zeros(4, np.float32))
    np.testing.assert_array_equal(out, np.cumsum(x, axis=0, dtype=np.float32))
    text = exe.stages["bufferized"]
    loop = text[text.index("scf.for"):]
    loop = loop[:loop.index("scf.yield")]
    moves = [line for line in loop.splitlines() if "memref.copy" in line or "memref.alloc" in line]
    assert moves and all(f"{n // 4}x4" not in line for line in moves), moves


def scan_errors():
    s = shape(np.float32, (3, 2))
    scalar = shape(np.float32)

    def two_carries(e, c):
        return e, c

    return [
        (lambda b: b.scan([], [b.parameter(0, scalar)], lambda c: c, 0), "at least one input"),
        (lambda b: b.scan(b.parameter(0, s), [], lambda e: e, 2), "scan_dimension 2 is out of range"),
        (lambda b: b.scan(b.parameter(0, s), [], lambda e: e, -1), "scan_dimension -1 is out of range"),
        (lambda b: b.scan([b.parameter(0, s), b.parameter(1, shape(np.float32, (4, 2)))], [],
                          lambda e, f: e, 0), "same size along scan_dimension"),
        (lambda b: b.scan(b.parameter(0, s), b.tuple([b.parameter(1, scalar)]), lambda e, c: c, 0),
         "must be arrays"),
        (lambda b: b.scan(b.parameter(0, s), b.parameter(1, scalar),
                          b_computation([shape(np.float32, (3,)), scalar]), 0),
         r"takes \(f32\[3\], f32\[\]\)"),
        (lambda b: b.scan(b.parameter(0, s), [b.parameter(1, scalar), b.parameter(2, scalar)],
                          lambda e, c, d: c, 0), "then 2 new carries"),
        (lambda b: b.scan(b.parameter(0, s), b.parameter(1, scalar),
                          lambda e, c: (e, e), 0), "a carry must keep its shape"),
        (lambda b: b.scan(b.parameter(0, s), b.parameter(1, scalar),
                          lambda e, c: (e.builder.tuple([e]), c), 0), "outputs must be arrays"),
        (lambda b: b.scan(b.parameter(0, s), b.parameter(1, scalar),
                          lambda e, c: (c, c), 1), "out of range for the output"),
        (lambda b: b.scan(b.parameter(0, s), [], lambda e: e, 0, is_reverse=1), "is_reverse must be"),
        (lambda b: b.scan(b.parameter(0, s), [], lambda e: e, 0, is_associative="yes"),
         "is_associative must be"),
        (lambda b: b.scan(b.parameter(0, s), [], two_carries, 0), "must take 1 parameters"),
    ]


def b_computation(params):
    sub = xm.XlaBuilder("wrong")
    ps = [sub.parameter(i, p) for i, p in enumerate(params)]
    sub.tuple([ps[0], ps[-1]])
    return sub.build()


@pytest.mark.parametrize("build, message", scan_errors())
def test_shape_errors(build, message):
    with pytest.raises(xm.ShapeError, match=message):
        build(xm.XlaBuilder("t"))


def test_rules_hold_for_parsed_text():
    x = np.float32([1, 2])
    text = build_scan([x], [np.float32(0)], lambda e, c: (c + e, c + e), 0).as_mlir_text()
    assert 'is_associative = ""' in text
    for edit, message in [(('is_associative = ""', 'is_associative = "maybe"'), "is_associative must"),
                          (("scan_dimension = 0 : i64", "scan_dimension = 1 : i64"), "out of range")]:
        bad = text.replace(*edit)
        assert bad != text
        with pytest.raises(xm.CompileError, match=message):
            xm.compile_mlir(bad)
