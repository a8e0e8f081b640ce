"""Differential fuzzing: random valid computations, compiled and run, against a numpy
reference interpreter (tests/reference_interpreter.py) that walks the same graph.

The generator (tests/differential_fuzzer.py) mixes elementwise chains, implicit and
explicit broadcasts, reductions, slices and `x[...]`, reverse, pad, concatenate,
reshape, transpose, dot_general, select, clamp, compare, convert, dynamic slices
and iota over f32/f64/s8/s32/s64/u8/u32/pred, with integer extremes and zeros as
inputs now and then. This is the CI-sized run; bench/fuzz_differential.py the
long one. A failing seed replays with `python bench/fuzz_differential.py --seed
SEED --cases 1 -v`.
"""

from __future__ import annotations

import numpy as np
import pytest
from builder_fuzzer import RandomSource
from differential_fuzzer import check_case, make_case
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from reference_interpreter import evaluate

import xlamlir as xm

S = xm.Shape.parse


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_random_computations_match_the_reference(seed) -> None:
    case = make_case(RandomSource(seed))
    problem = check_case(case)
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
