"""A loop's vector accumulator kept in a register by the vectorized stage
(lowering/passes/vectorize.py, `hoist_vector_accumulators`): the same bits as without."""

from __future__ import annotations

import re

import numpy as np

import xlamlir as xm
from xlamlir.lowering.passes.vectorize import hoist_vector_accumulators
from xlamlir.runtime.compiler import clear_cache


def vecmat(k: int = 512, n: int = 500) -> xm.XlaComputation:
    # 500 columns: not the few-rows kernel (whole vectors only), the generic path.
    b = xm.XlaBuilder("vecmat")
    b.dot(b.parameter(0, xm.Shape.array(xm.F32, (k,))), b.parameter(1, xm.Shape.array(xm.F32, (k, n))))
    return b.build()


def _k_loops(text: str) -> list[str]:
    """The loops over k (512 trips) in a vectorized stage, each from its line to its
    closing brace."""
    loops = []
    for m in re.finditer(r"affine\.for %\w+ = 0 to 512 ", text):
        depth, at = 0, text.index("{", m.end())
        for i in range(at, len(text)):
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                loops.append(text[m.start():i + 1])
                break
    return loops


def _without() -> xm.Pipeline:
    kept = [p for p in xm.Pipeline.default().passes("vectorized") if p is not hoist_vector_accumulators]
    return xm.Pipeline.default().replace("vectorized", kept)


def test_the_accumulator_is_carried_not_stored() -> None:
    clear_cache()
    text = xm.compile(vecmat()).stages["vectorized"]
    loops = _k_loops(text)
    assert loops and all("iter_args" in loop and "transfer_write" not in loop for loop in loops)
    clear_cache()
    before = xm.compile(vecmat(), _without()).stages["vectorized"]
    assert any("transfer_write" in loop for loop in _k_loops(before))


def test_the_same_bits_with_and_without() -> None:
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(512).astype(np.float32), rng.standard_normal((512, 500)).astype(np.float32)
    clear_cache()
    hoisted = xm.compile(vecmat())(x, w)
    clear_cache()
    stored = xm.compile(vecmat(), _without())(x, w)
    np.testing.assert_array_equal(hoisted.view(np.uint32), stored.view(np.uint32))
    np.testing.assert_allclose(hoisted, x.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
