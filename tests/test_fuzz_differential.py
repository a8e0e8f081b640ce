"""Differential fuzzing: random valid computations, compiled and run, against the numpy
reference interpreter (`evaluate` in tests/reference.py) that walks the same graph.

The generator (tests/differential_fuzzer.py, structured families in
tests/differential_fuzzer_ops.py) mixes elementwise chains, broadcasts, reductions,
slices, dots and data movement with every other op family: gather, scatter (variadic,
out-of-bounds windows), sort (multi-operand, stable and unstable), while, conditional,
call, map, variadic reduce, reduce_window, select_and_scatter, convolution (groups,
padding, dilations), fft, cholesky, triangular_solve, batch norm, bitcasts; and programs
whose in-place ops share one operand (two scatters / dynamic_update_slices / sorts /
while loops on one init, or on two equal broadcast constants) with several results.
This is the CI-sized run; bench/fuzz_differential.py the long one. A failing seed
replays with `python bench/fuzz_differential.py --seed SEED --cases 1 -v`.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from builder_fuzzer import RandomSource
from differential_fuzzer import Value, canonical_ties, check_case, compare_leaf, make_case
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from reference import evaluate, philox4x32, threefry2x32

import xlamlir as xm

S = xm.Shape.parse


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_computations_match_the_reference(seed) -> None:
    case = make_case(RandomSource(seed))
    problem = check_case(case, split_jit=seed % 2 == 1)
    if problem:
        trace = "\n".join(f"  {line}" for line in case.trace)
        pytest.fail(f"seed {seed}: {problem}\nops:\n{trace}\n{case.computation.as_mlir_text()}",
                    pytrace=False)


# ---- the interpreter itself, on hand-checked values --------------------------------------------


def _run_both(shapes, body, *args):
    b = xm.XlaBuilder("ref")
    ps = [b.parameter(i, S(s)) for i, s in enumerate(shapes)]
    comp = b.build(body(b, *ps))
    return xm.compile(comp)(*args), evaluate(comp, args)


def test_reference_integer_division_semantics() -> None:
    a = np.array([7, -7, 7, -7, 5, -(2**31), -(2**31), 0], np.int32)
    d = np.array([2, 2, -2, -2, 0, -1, 0, 0], np.int32)
    got, want = _run_both(["s32[8]", "s32[8]"], lambda b, x, y: b.tuple([b.div(x, y), b.rem(x, y)]),
                          a, d)
    np.testing.assert_array_equal(want[0], [3, -3, -3, 3, -1, -(2**31), -1, -1])
    np.testing.assert_array_equal(want[1], [1, -1, 1, -1, 5, 0, -(2**31), 0])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_reference_shift_semantics() -> None:
    a = np.array([1, -8, -8, -128, -1, 3], np.int8)
    s = np.array([9, 1, 8, 7, 1, -1], np.int8)
    got, want = _run_both(["s8[6]", "s8[6]"], lambda b, x, y: b.tuple([
        b.shift_left(x, y), b.shift_right_arithmetic(x, y), b.shift_right_logical(x, y)]), a, s)
    np.testing.assert_array_equal(want[0], [0, -16, 0, 0, -2, 0])
    np.testing.assert_array_equal(want[1], [0, -4, -1, -1, -1, 0])
    np.testing.assert_array_equal(want[2], [0, 124, 0, 1, 127, 0])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ---- regressions found by the differential fuzzer ----------------------------------------------


@pytest.mark.parametrize("other", [
    lambda b, c: c,
    lambda b, c: b.reshape(c, [2, 2]),
    lambda b, c: b.slice(c, [1], [3]),
    lambda b, c: b.neg(c),
], ids=["itself", "reshape", "slice", "consumer"])
@pytest.mark.parametrize("make", [lambda b, x: b.neg(x), lambda b, x: x + x, lambda b, x: x],
                         ids=["neg", "add", "parameter"])
def test_updated_value_and_its_original_both_returned(make, other) -> None:
    """(dynamic_update_slice(c, u), c): empty-tensor elimination computed c in the first
    result's buffer, and the update overwrote it before c was copied out (seed 120)."""
    b = xm.XlaBuilder("dus_alias")
    x = b.parameter(0, S("f64[4]"))
    u = b.parameter(1, S("f64[2]"))
    c = make(b, x)
    r = b.dynamic_update_slice(c, u, [b.constant(np.int32(1))])
    comp = b.build([r, other(b, c)])
    args = (np.arange(4.0), np.array([9.0, 8.0]))
    got, want = xm.compile(comp)(*args), evaluate(comp, args)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# affine-super-vectorize pads partial vectors with ub.poison; an integer div/rem with poison
# divisor lanes is UB in LLVM and gave garbage in the real lanes (fuzz_differential seed 1000644).
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64],
                         ids=lambda t: np.dtype(t).name)
def test_integer_remainder_by_a_constant_in_a_partial_vector(dtype) -> None:
    b = xm.XlaBuilder("rem_const")
    x = b.parameter(0, xm.Shape.array(dtype, (2, 1)))
    b.rem(x, b.constant(np.array([[-6], [-4]], dtype)))
    got = xm.compile(b.build())(np.array([[-3], [9]], dtype))
    np.testing.assert_array_equal(got, np.array([[-3], [1]], dtype))


def test_two_scatters_on_equal_broadcast_inits() -> None:
    """Issue #14: two scatters whose structurally identical inits were merged shared one
    buffer; the second result silently held the first's."""
    b = xm.XlaBuilder("h2")
    p = b.parameter(0, xm.Shape.array(xm.S32, (64,)))
    q = b.parameter(1, xm.Shape.array(xm.S32, (64,)))
    dn = xm.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    ones = b.broadcast(b.constant(np.int32(1)), (64,))
    e1 = b.broadcast(b.constant(np.int32(0)), (16,))
    e2 = b.broadcast(b.constant(np.int32(0)), (16,))
    b.tuple([b.scatter(e1, p, ones, lambda u, w: u + w, dn),
             b.scatter(e2, q, ones, lambda u, w: u + w, dn)])
    comp = b.build()
    args = (np.zeros(64, np.int32), np.full(64, 3, np.int32))
    got, want = xm.compile(comp)(*args), evaluate(comp, args)
    assert want[1][3] == 64 and want[0][0] == 64
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ---- the interpreter's structured ops, on hand-checked values ----------------------------------


def _check(comp, args, expected) -> None:
    """The interpreter gives `expected` and the library agrees."""
    want = evaluate(comp, args)
    got = xm.compile(comp)(*args)
    for w, e in zip(want if isinstance(want, tuple) else (want,),
                    expected if isinstance(want, tuple) else (expected,)):
        np.testing.assert_array_equal(w, np.asarray(e, w.dtype))
    for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_array_equal(g, w)


def test_reference_scatter_skips_windows_that_do_not_fit() -> None:
    b = xm.XlaBuilder("scatter_oob")
    x = b.parameter(0, S("s32[5]"))
    dn = xm.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    b.scatter(x, b.constant(np.array([[0], [4], [-1], [3], [0]], np.int32)),
              b.constant(np.array([[1, 2]] * 5, np.int32)), lambda u, w: u + w, dn)
    _check(b.build(), [np.zeros(5, np.int32)], [2, 4, 0, 1, 2])


def test_reference_gather_clamps_starts() -> None:
    b = xm.XlaBuilder("gather_clamp")
    x = b.parameter(0, S("s32[5]"))
    dn = xm.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,),
                                   index_vector_dim=1)
    b.gather(x, b.constant(np.array([[-3], [4], [1]], np.int32)), dn, [2])
    _check(b.build(), [np.arange(5, dtype=np.int32)], [[0, 1], [3, 4], [1, 2]])


def test_reference_stable_multi_operand_sort() -> None:
    b = xm.XlaBuilder("sort")
    k = b.parameter(0, S("s32[5]"))
    v = b.parameter(1, S("f32[5]"))
    b.sort([k, v], lambda a, c, _x, _y: a.builder.gt(a, c), is_stable=True)
    _check(b.build(), [np.array([1, 3, 1, 3, 2], np.int32), np.arange(5, dtype=np.float32)],
           ([3, 3, 2, 1, 1], [1, 3, 4, 0, 2]))


def test_reference_conditional_out_of_range_runs_the_last_branch() -> None:
    b = xm.XlaBuilder("case")
    i = b.parameter(0, S("s32[]"))
    x = b.parameter(1, S("f32[2]"))
    b.conditional(i, [lambda p: p, lambda p: p.builder.neg(p), lambda p: p + p], [x, x, x])
    comp = b.build()
    for index, expected in [(0, [1, 2]), (1, [-1, -2]), (7, [2, 4]), (-1, [2, 4])]:
        _check(comp, [np.int32(index), np.array([1, 2], np.float32)], expected)


def test_reference_reduce_window_seed_example() -> None:
    """SEMANTICS 5.E: min over [10000, 1000, 100, 10, 1], window 3, stride 2."""
    b = xm.XlaBuilder("rw")
    x = b.parameter(0, S("f32[5]"))
    inf = b.constant(np.float32(np.inf))
    b.tuple([b.reduce_window(x, inf, lambda a, c: a.builder.min(a, c), [3], [2]),
             b.reduce_window(x, inf, lambda a, c: a.builder.min(a, c), [3], [2], padding=[(1, 1)])])
    _check(b.build(), [np.array([10000, 1000, 100, 10, 1], np.float32)], ([100, 1], [1000, 10, 1]))


def test_reference_select_and_scatter_accumulates_overlaps() -> None:
    b = xm.XlaBuilder("sas")
    x = b.parameter(0, S("f32[5]"))
    src = b.parameter(1, S("f32[2]"))
    b.select_and_scatter(x, lambda a, c: a.builder.ge(a, c), [3], [2], [(0, 0)], src,
                         b.constant(np.float32(0)), lambda a, c: a + c)
    _check(b.build(), [np.array([1, 2, 9, 3, 4], np.float32), np.array([2, 6], np.float32)],
           [0, 0, 8, 0, 0])


def test_reference_grouped_convolution() -> None:
    """feature_group_count 2: each half of the input features meets its own kernels."""
    b = xm.XlaBuilder("conv")
    x = b.parameter(0, S("f32[1,2,3]"))
    k = b.parameter(1, S("f32[2,1,2]"))
    b.conv_general_dilated(x, k, [1], [(0, 0)], feature_group_count=2)
    _check(b.build(), [np.arange(6, dtype=np.float32).reshape(1, 2, 3),
                       np.array([[[1, 1]], [[1, -1]]], np.float32)], [[[1, 3], [-1, -1]]])


def test_reference_while_and_call() -> None:
    b = xm.XlaBuilder("loop")
    x = b.parameter(0, S("s32[]"))
    w = b.while_(lambda s: s.builder.lt(s, s.builder.constant(np.int32(100))),
                 lambda s: s.builder.call(lambda v: v + v, [s]), x)
    b.tuple([w, x])
    _check(b.build(), [np.int32(3)], (192, 3))


def test_reference_bit_generators_known_answers() -> None:
    """Random123's known-answer vectors (zero key and counter), then XLA's layouts."""
    z = np.zeros(1, np.uint64)
    assert [int(v[0]) for v in threefry2x32(z, z, 0, 0)] == [0x6B200159, 0x99BA4EFE]
    assert [int(v[0]) for v in philox4x32([z] * 4, 0, 0)] == [0x6627E8D5, 0xE169C58D,
                                                             0xBC57AC4C, 0x9B00DBD8]
    for algorithm, state in [("THREE_FRY", [5, 2**64 - 3]), ("PHILOX", [7, 2**64 - 2, 9])]:
        for shape in ["u32[3,5]", "u64[5]", "u8[3]", "u16[2,3,5]", "u32[]"]:
            b = xm.XlaBuilder("rng")
            s = b.parameter(0, xm.Shape.array(xm.U64, (len(state),)))
            b.rng_bit_generator(algorithm, s, S(shape))
            comp = b.build()
            args = [np.array(state, np.uint64)]
            for g, w in zip(xm.compile(comp)(*args), evaluate(comp, args)):
                np.testing.assert_array_equal(g, w)


def test_unstable_sort_ties_compare_as_multisets() -> None:
    """The non-key results of an unstable sort are compared up to the order within runs of
    equal keys, and no further."""
    keys = np.array([[0, 0, 1, 1, 1], [2, 3, 3, 4, 4]])
    a = np.array([[5, 4, 9, 7, 8], [1, 2, 3, 4, 5]])
    b = np.array([[4, 5, 7, 8, 9], [1, 3, 2, 5, 4]])
    np.testing.assert_array_equal(canonical_ties(a, keys, 1), canonical_ties(b, keys, 1))
    c = np.array([[4, 5, 7, 8, 9], [2, 1, 3, 5, 4]])  # 1 and 2 have different keys
    assert not np.array_equal(canonical_ties(a, keys, 1), canonical_ties(c, keys, 1))


def test_one_rounding_results_compare_in_ulps() -> None:
    """A function of exact operands is compared in units in the last place: 0 for IEEE's
    correctly rounded ops, a few for transcendental ones; NaN and inf must match."""
    b = xm.XlaBuilder("ulps")
    op = b.parameter(0, S("f32[3]"))
    want = np.array([1.0, np.nan, np.inf], np.float32)
    one_ulp = np.array([np.nextafter(np.float32(1), np.float32(2)), np.nan, np.inf], np.float32)
    assert compare_leaf(one_ulp, want, Value(op, 2.0, False, ulps=0.0)) is not None
    assert compare_leaf(one_ulp, want, Value(op, 2.0, False, ulps=4.0)) is None
    assert compare_leaf(np.array([1.0, 0.0, np.inf], np.float32), want,
                        Value(op, 2.0, False, ulps=4.0)) is not None


# Found by bench/fuzz_differential.py (seed 400865 of commit 5258bb0's generator, minimized):
# a conditional whose taken branch returns its operand, a constant, feeds a while loop that
# dynamic_update_slices the carried array in place; only the loop counter is returned, beside
# another value. The process dies with SIGSEGV in the compiled code, intermittently (with
# index 0, the rev branch, or without the conditional, it runs). Run in a subprocess: a
# segfault cannot be caught in-process.
_CONSTANT_THROUGH_CONDITIONAL_INTO_LOOP = textwrap.dedent("""
    import numpy as np, xlamlir as xm
    b = xm.XlaBuilder("seg")
    index = b.parameter(0, xm.Shape.array(xm.S32, ()))
    other = b.constant(np.zeros((2, 2), np.float32)) + b.constant(np.float32(1))
    c = b.constant(np.arange(9, dtype=np.uint32).reshape(3, 3, 1))
    x = b.conditional(index, [lambda p: p.builder.rev(p, [0, 1, 2]), lambda p: p], [c, c])
    def cond(s):
        sb = s.builder
        return sb.lt(sb.get_tuple_element(s, 0), sb.constant(np.int32(3)))
    def body(s):
        sb = s.builder
        i, v = sb.get_tuple_element(s, 0), sb.get_tuple_element(s, 1)
        v = sb.dynamic_update_slice(v, sb.broadcast(sb.constant(np.uint32(0)), [1, 1, 1]), [i, i, i])
        return sb.tuple([sb.add(i, sb.constant(np.int32(1))), v])
    w = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x]))
    b.tuple([other, b.get_tuple_element(w, 0)])
    comp = b.build()
    for _ in range(10):  # the crash is intermittent
        got = xm.compile(comp)(np.int32(-1))
        assert got[1] == 3 and (got[0] == 1).all(), got
""")


def test_while_updating_a_constant_passed_through_a_conditional() -> None:
    # Was a SIGSEGV: the loop updated the constant in place (an s32 conditional was an
    # scf.index_switch, through which bufferization lost that the constant is read-only).
    run = subprocess.run([sys.executable, "-c", _CONSTANT_THROUGH_CONDITIONAL_INTO_LOOP],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-500:]}"
