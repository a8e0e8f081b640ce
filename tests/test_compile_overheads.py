"""Per-compile Python costs removed without changing any result (issue #17): xhlo ops
wrapped without an import attempt each, shapes of types parsed once, the lowering
patterns made once per context, the computation library copied without `main`."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import new_context, reused_context
from xlamlir.dialect.errors import ShapeError
from xlamlir.dialect.type_shapes import shape_of_type, shape_of_type_text
from xlamlir.lowering import lower_pass
from xlamlir.lowering.patterns.framework import pattern_set
from xlamlir.runtime.lower import parse_module


def _reduce_program(n: int = 5) -> xm.XlaComputation:
    b = xm.XlaBuilder("row_sums")
    x = b.parameter(0, xm.Shape.array(xm.F32, (3, n)))
    b.reduce(x, b.constant(np.float32(0)), lambda a, v: a + v, [1])
    return b.build()


class _ImportCounter:
    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        self.names.append(name)


def test_wrapping_xhlo_ops_imports_nothing():
    counter = _ImportCounter()
    text = _reduce_program().as_mlir_text()
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        sys.meta_path.insert(0, counter)
        try:
            names = [op.operation.name for f in module.body.operations
                     for op in f.regions[0].blocks[0].operations]
        finally:
            sys.meta_path.remove(counter)
    assert "xhlo.reduce" in names
    # MLIR's bindings import a dialect's Python module for every op they wrap and only
    # remember a success: without one for xhlo, each op searched the file system.
    assert counter.names == []


def test_shape_of_type_is_parsed_once_per_text():
    with new_context():
        t = ir.Type.parse("tensor<2x3xf32>")
        first = shape_of_type(t)
        assert first == xm.Shape.array(xm.F32, (2, 3))
        assert shape_of_type(ir.Type.parse("tensor<2x3xf32>")) is first
        # A failure is not remembered: it raises every time.
        for _ in range(2):
            with pytest.raises(ShapeError):
                shape_of_type_text("vector<4xf32>")


def test_lowering_patterns_are_made_once_per_reused_context():
    with reused_context() as context:
        assert pattern_set(context) is pattern_set(context)
    with new_context() as other:
        assert pattern_set(other) is not pattern_set(other)  # no cache: a fresh set each


def _lowered(text: str) -> str:
    with reused_context(), ir.Location.unknown():
        module = parse_module(text, 1)
        lower_pass.lower_xhlo(module.operation, None)
        # The accumulators' tags count per process (lowering/ops/reduce.py).
        return re.sub(r"xlamlir\.accumulator = -?\d+", "xlamlir.accumulator = N", str(module))


def test_lowering_twice_with_the_kept_patterns_gives_the_same_module():
    text = _reduce_program().as_mlir_text()
    assert _lowered(text) == _lowered(text)


def test_the_computation_library_holds_the_computations_without_main(monkeypatch):
    seen: list[str] = []
    original = lower_pass.ComputationLibrary

    def recording(module_op):
        seen.append(str(module_op))
        return original(module_op)

    monkeypatch.setattr(lower_pass, "ComputationLibrary", recording)
    b = xm.XlaBuilder("big_constant")
    x = b.parameter(0, xm.Shape.array(xm.F32, (3, 4096)))
    table = b.constant(np.arange(3 * 4096, dtype=np.float32).reshape(3, 4096))
    b.reduce(b.add(x, table), b.constant(np.float32(0)), lambda a, v: a + v, [1])
    comp = b.build()
    _lowered(comp.as_mlir_text())
    assert len(seen) == 1
    assert "@main" not in seen[0] and "func.func" in seen[0] and len(seen[0]) < 2000
    got = xm.compile(comp)(np.ones((3, 4096), np.float32))
    want = (np.ones((3, 4096), np.float32) + np.arange(3 * 4096, dtype=np.float32).reshape(3, 4096)).sum(1)
    np.testing.assert_allclose(got, want, rtol=1e-6)
