"""Builder fuzzing: random op sequences with random, often invalid, arguments.

Every builder call either returns an XlaOp or raises xm.ShapeError, and every
computation that builds gives a module that parses and verifies (the dialect's
verifier re-runs every shape rule on the parsed IR). The generator is
tests/builder_fuzzer.py; this is the CI-sized run (derandomized, so CI is
reproducible), bench/fuzz_builder.py the long one. The regression tests at the
end are the failures the fuzzer found, each reduced to its call.
"""

from __future__ import annotations

import numpy as np
import pytest
from builder_fuzzer import HypothesisSource, RandomSource, run_case
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import xlamlir as xm

S = xm.Shape.parse
# No shrinking: a case is a long chain of draws and shrinking one takes minutes; the failure
# message carries the trace of calls instead (bench/fuzz_builder.py gives seeds to replay).
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _check(outcome, seed: int | None = None) -> None:
    if outcome.failure:
        trace = "\n".join(f"  {line}" for line in outcome.trace)
        where = f" (seed {seed})" if seed is not None else ""
        pytest.fail(f"{outcome.failure}{where}\ncalls:\n{trace}", pytrace=False)


@FUZZ
@given(st.integers(0, 2**32 - 1))
def test_random_programs_build_or_raise_shape_error(seed) -> None:
    # A seed of the fast random source: a failure replays with
    # `python bench/fuzz_builder.py --seed SEED --cases 1 -v`.
    _check(run_case(RandomSource(seed), steps=8, garbage=0.03), seed)


@settings(FUZZ, max_examples=40)
@given(st.data())
def test_arguments_of_the_wrong_kind_raise_shape_error(data) -> None:
    # Every choice drawn by hypothesis; garbage (None, strings, floats, foreign ops) in place
    # of ops and int lists, often.
    _check(run_case(HypothesisSource(data), steps=5, garbage=0.25))


# ---- regressions found by the fuzzer ----------------------------------------------------------


@pytest.fixture
def x(b) -> xm.XlaOp:
    return b.parameter(0, S("f32[2,3]"))


@pytest.mark.parametrize("call", [
    lambda b, x: b.transpose(x, "ab"),
    lambda b, x: b.transpose(None, [1, 0]),
    lambda b, x: b.broadcast_in_dim(x, [2, 3], [0, 1.5]),
    lambda b, x: b.broadcast_in_dim(x, 2.0, [0, 1]),
    lambda b, x: b.add(x, "x"),
    lambda b, x: b.slice(x, [0, 0], None),
    lambda b, x: b.map([x, [x]], lambda a, c: a + c),
    lambda b, x: b.conditional(b.constant(0), [lambda a: a], [[x]]),
    lambda b, x: b.get_tuple_element(b.tuple([x]), "0"),
    lambda b, x: b.iota("f32[3]", 0),
    lambda b, x: b.batch_norm_training(x, x, x, "eps", 1),
    lambda b, x: b.concat_in_dim([x, 1.0], 0),
    lambda b, x: x + None,
    lambda b, x: x * "a",
    lambda b, x: x + 1j,
    lambda b, x: b.convert_element_type(x, xm.S32) + 1.5,
    lambda b, x: b.convert_element_type(x, xm.S32) - 2**40,
    lambda b, x: b.convert_element_type(x, xm.PRED) | 2,
], ids=["perm-str", "operand-none", "float-dim", "float-sizes", "str-operand",
        "none-limits", "nested-list", "nested-branch-operands", "str-index", "str-shape",
        "str-epsilon", "float-in-operands", "plus-none", "times-str",
        "complex-for-f32", "fraction-for-s32", "too-big-for-s32", "two-for-pred"])
def test_wrong_kind_of_argument_is_a_shape_error(b, x, call) -> None:
    with pytest.raises(xm.ShapeError):
        call(b, x)


def test_op_of_another_builder_is_a_shape_error(b, x) -> None:
    other = xm.XlaBuilder("other").parameter(0, S("f32[2,3]"))
    with pytest.raises(xm.ShapeError, match="other"):
        b.transpose(other, [1, 0])
    with pytest.raises(xm.ShapeError, match="other"):
        b.concat_in_dim([x, other], 0)


@pytest.mark.parametrize("index", [np.s_[::0], np.s_["a":], np.s_[:, 0:1.5]], ids=str)
def test_bad_slice_in_index_is_a_shape_error(x, index) -> None:
    with pytest.raises(xm.ShapeError, match="slice"):
        x[index]


@pytest.mark.parametrize("computation", [
    lambda a: a,  # reduce passes two parameters
    lambda a, c, d: a,
    lambda: None,
    lambda *, a: a,
], ids=["one", "three", "none", "keyword-only"])
def test_callable_of_the_wrong_arity_is_a_shape_error(b, x, computation) -> None:
    with pytest.raises(xm.ShapeError, match="2 parameter"):
        b.reduce(x, b.constant(np.float32(0)), computation, [0])


def test_callables_with_defaults_and_varargs_are_traced(b, x) -> None:
    init = b.constant(np.float32(0))
    assert b.reduce(x, init, lambda a, c, scale=1: a + c, [0]).shape == S("f32[3]")
    assert b.reduce(x, init, lambda *ps: ps[0] + ps[1], [1]).shape == S("f32[2]")


def test_scalars_that_fit_become_constants(b, x) -> None:
    i = b.convert_element_type(x, xm.S32)
    assert (i * 2.0).shape == S("s32[2,3]")  # integral floats fit
    assert (x * 0.1).shape == S("f32[2,3]")  # rounding to a float type is fine
    assert (b.convert_element_type(x, xm.C64) + 1j).shape == S("c64[2,3]")
    assert (b.convert_element_type(x, xm.PRED) & True).shape == S("pred[2,3]")


def test_methods_keep_their_names_and_docs() -> None:
    assert xm.XlaBuilder.transpose.__name__ == "transpose"
    assert xm.XlaBuilder.select.__doc__
