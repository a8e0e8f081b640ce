"""The thread's reusable MLIR context (dialect/context.py: reused_context): building and
compiling share one per thread instead of making one each (~10 ms of CPU apiece), and
replace it after CONTEXT_USES uses or CONTEXT_TEXT_CHARS characters of module text
(a context never frees its uniqued attributes)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.dialect import context as contexts_module


@pytest.fixture
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contexts_module, "_reused", threading.local())


def test_one_context_per_thread(fresh_state: None) -> None:
    first = contexts_module.reused_context()
    assert contexts_module.reused_context() is first
    other: list[object] = []
    thread = threading.Thread(target=lambda: other.append(contexts_module.reused_context()))
    thread.start()
    thread.join()
    assert other[0] is not first


def test_replaced_after_its_uses(fresh_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contexts_module, "CONTEXT_USES", 3)
    contexts = [contexts_module.reused_context() for _ in range(7)]
    assert [c is contexts[0] for c in contexts] == [True] * 3 + [False] * 4
    assert contexts[3] is contexts[5] and contexts[6] is not contexts[3]


def test_replaced_after_its_text(fresh_state: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contexts_module, "CONTEXT_TEXT_CHARS", 1000)
    first = contexts_module.reused_context(600)
    assert contexts_module.reused_context(600) is first  # 600 counted so far: still under 1000
    second = contexts_module.reused_context()
    assert second is not first
    contexts_module.charge_context(second, 5000)  # a built module's text, counted once known
    contexts_module.charge_context(first, 10**9)  # not this thread's context: ignored
    assert contexts_module.reused_context() is not second


def test_builds_and_compiles_share_it(fresh_state: None) -> None:
    results = []
    first = contexts_module.reused_context()
    for k in range(3):
        b = xm.XlaBuilder(f"scale{k}")
        b.mul(b.parameter(0, xm.Shape.array(xm.F32, (4,))), b.constant(np.float32(k + 1)))
        results.append(xm.compile(b.build())(np.arange(4, dtype=np.float32)))
    state = contexts_module._reused.state
    assert state[0] is first and state[1] >= 4  # the builds (compiles too, unless cached)
    for k, r in enumerate(results):
        np.testing.assert_array_equal(r, np.arange(4, dtype=np.float32) * (k + 1))
