"""One benchmark row from its parts: our computation, the inputs, numpy's and JAX's version.

`measure` compiles ours cold, checks our result (and JAX's) against the reference before
timing anything, then times ours, numpy and JAX, each in its own block of calls (medians).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from peers import jax, jax_compile
from timing import Measurement, compile_ours, medians

import xlamlir as xm


def f32_params(name: str, *shapes: tuple[int, ...]) -> tuple[xm.XlaBuilder, list[Any]]:
    """A builder and one f32 parameter per shape."""
    b = xm.XlaBuilder(name)
    return b, [b.parameter(i, xm.Shape.array(xm.F32, dims)) for i, dims in enumerate(shapes)]


def normal(seed: int, *shapes: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Standard normal f32 arrays of `shapes`, from one seeded generator."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s, dtype=np.float32) for s in shapes)


@dataclass
class Case:
    """A workload. `numpy_fn(*args)` is timed; `reference(*args)` (default: numpy_fn) is the
    expected result, e.g. computed in float64. Results may be tuples (checked leaf by leaf)."""

    build: Callable[[], xm.XlaComputation | Sequence[xm.XlaComputation]]
    args: Callable[[], tuple[Any, ...]]
    numpy_fn: Callable[..., Any]
    jax_fn: Callable[..., Any] | None
    work: float | None
    unit: str
    repeats: int = 9
    rtol: float = 1e-5
    atol: float = 1e-6
    reference: Callable[..., Any] | None = None
    check: Callable[[Any, Any], None] | None = None  # replaces assert_allclose
    # Several computations run one after another, each result feeding the next
    # (a pipeline of programs, e.g. "z alone, then sum alone"); the result is the
    # tuple of every program's result.
    chained: bool = field(default=False)


def _check(case: Case, who: str, actual: Any, expected: Any) -> None:
    leaves = zip(actual, expected) if isinstance(expected, tuple) else [(actual, expected)]
    if isinstance(expected, tuple) and (not isinstance(actual, tuple) or len(actual) != len(expected)):
        raise AssertionError(f"{who}: expected a tuple of {len(expected)} results")
    for a, e in leaves:
        if case.check is not None:
            case.check(np.asarray(a), np.asarray(e))
        else:
            np.testing.assert_allclose(np.asarray(a), e, rtol=case.rtol, atol=case.atol,
                                       err_msg=f"{who} differs from the reference")


def measure(case: Case) -> Measurement:
    built = case.build()
    computations = list(built) if isinstance(built, (list, tuple)) else [built]
    exes, compile_s = compile_ours(*computations)
    args = case.args()
    if case.chained:
        def ours() -> Any:
            outs = [exes[0](*args)]
            for exe in exes[1:]:
                outs.append(exe(outs[-1]))
            return tuple(outs)
    else:
        assert len(exes) == 1
        exe = exes[0]

        def ours() -> Any:
            return exe(*args)

    expected = (case.reference or case.numpy_fn)(*args)
    _check(case, "xlamlir", ours(), expected)
    jax_call = jax_compile_s = None
    if jax is not None and case.jax_fn is not None:
        to_numpy, jax_call, jax_compile_s = jax_compile(case.jax_fn, args)
        _check(case, "jax", to_numpy(), expected)
    ours_s, numpy_s, jax_s = medians([ours, lambda: case.numpy_fn(*args), jax_call], case.repeats)
    assert ours_s is not None and numpy_s is not None
    return Measurement(ours_s=ours_s, numpy_s=numpy_s, jax_s=jax_s, compile_s=compile_s,
                       work=case.work, unit=case.unit, jax_compile_s=jax_compile_s)
