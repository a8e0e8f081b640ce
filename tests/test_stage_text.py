"""`exe.stages` text is the program: no bookkeeping attributes, deterministic, segment sizes one
entry per operand group, no register-tile lines hundreds of entries long."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pytest
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.lowering.pipeline import ELIDED, readable_stage_text

F32 = xm.F32


def softmax(n: int = 128, shifted: bool = False) -> xm.XlaComputation:
    """A row softmax of f32[8, n]; `shifted`: of the parameter plus an [8, n] constant
    (printed as a hex blob, elided in the stages between the first and the last)."""
    b = xm.XlaBuilder("softmax")
    x = b.parameter(0, xm.Shape.array(F32, (8, n)))
    if shifted:
        x = b.add(x, b.constant(np.arange(8 * n, dtype=np.float32).reshape(8, n)))
    m = b.reduce(x, b.constant(np.float32(-np.inf)), lambda p, q: p.builder.max(p, q), [1])
    e = b.exp(b.sub(x, m, broadcast_dimensions=(0,)))
    s = b.reduce(e, b.constant(np.float32(0)), lambda p, q: p + q, [1])
    b.div(e, s, broadcast_dimensions=(0,))
    return b.build()


def matmul() -> xm.XlaComputation:
    b = xm.XlaBuilder("matmul")
    b.dot(b.parameter(0, xm.Shape.array(F32, (128, 256))), b.parameter(1, xm.Shape.array(F32, (256, 64))))
    return b.build()


def conv() -> xm.XlaComputation:
    b = xm.XlaBuilder("conv")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(F32, (1, 16, 16, 8))),
                           b.parameter(1, xm.Shape.array(F32, (3, 3, 8, 16))), (1, 1), [(1, 1), (1, 1)],
                           dimension_numbers=xm.ConvDimensionNumbers.from_layouts("NHWC", "HWIO", "NHWC"))
    return b.build()


def reduce() -> xm.XlaComputation:
    b = xm.XlaBuilder("reduce")
    b.reduce(b.parameter(0, xm.Shape.array(F32, (64, 32))), b.constant(np.float32(0)),
             lambda p, q: p + q, [0])
    return b.build()


PROGRAMS: dict[str, Callable[[], xm.XlaComputation]] = {
    "softmax": softmax, "matmul": matmul, "conv": conv, "reduce": reduce}
_STAGES: dict[str, dict[str, str]] = {}


def stages(name: str) -> dict[str, str]:
    if name not in _STAGES:
        _STAGES[name] = xm.compile(PROGRAMS[name]()).stages
    return _STAGES[name]


def test_bookkeeping_attributes_are_not_in_the_stage_text() -> None:
    for name in ("softmax", "reduce"):
        for stage, text in stages(name).items():
            assert "xlamlir.accumulator" not in text, (name, stage)


def test_stage_text_is_the_same_for_every_compile_of_a_program() -> None:
    text = softmax().as_mlir_text()

    def run() -> dict[str, str]:  # the pipeline itself: no compile cache in the way
        with new_context() as ctx, ir.Location.unknown():
            return xm.Pipeline.default().run(ir.Module.parse(text, context=ctx))

    assert run() == run()


def test_readable_stage_text_drops_the_attribute_in_every_position() -> None:
    text = ("%0 = tensor.empty() {xlamlir.accumulator = 12 : i64} : tensor<4xf32>\n"
            "%1 = tensor.empty() {a = 1 : i64, xlamlir.accumulator = 3 : i64} : tensor<4xf32>\n"
            "%2 = tensor.empty() {xlamlir.accumulator = 3 : i64, b = 2 : i64} : tensor<4xf32>\n")
    assert readable_stage_text(text) == ("%0 = tensor.empty() : tensor<4xf32>\n"
                                         "%1 = tensor.empty() {a = 1 : i64} : tensor<4xf32>\n"
                                         "%2 = tensor.empty() {b = 2 : i64} : tensor<4xf32>\n")


def test_large_constants_are_elided_between_the_first_and_last_stages() -> None:
    b = xm.XlaBuilder("big_constant")
    table = np.arange(4096, dtype=np.float32).reshape(64, 64)
    b.add(b.parameter(0, xm.Shape.array(F32, (64, 64))), b.constant(table))
    comp = b.build()
    exe = xm.compile(comp)
    names = list(exe.stages)
    assert exe.stages["hlo"] == comp.as_mlir_text()  # re-parseable: compile_mlir round trips
    for stage in names[1:-1]:
        assert ELIDED in exe.stages[stage], stage
        assert max(map(len, exe.stages[stage].splitlines())) < 400, stage
    assert ELIDED not in exe.stages[names[-1]]  # exe.export compiles the last stage
    np.testing.assert_array_equal(exe(np.ones((64, 64), np.float32)), table + 1)
    np.testing.assert_array_equal(xm.compile_mlir(exe.stages["hlo"])(np.zeros((64, 64), np.float32)),
                                  table)


def test_the_hlo_stage_is_the_module_as_built() -> None:
    comp = reduce()
    assert xm.compile(comp).stages["hlo"] == comp.as_mlir_text()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_stage_has_lines_over_800_characters(name: str) -> None:
    """The longest lines left: the hlo stage of a conv (its dimension numbers, ~740) and the
    llvm stage's function signatures (memref descriptors, ~610)."""
    for stage, text in stages(name).items():
        for line in text.splitlines():
            assert len(line) <= 800, (stage, line[:200])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_lowered_stage_line_over_300_characters(name: str) -> None:
    """Between the module as built and the LLVM dialect: in particular no register tile of
    the contraction schedules as one vector.from_elements of its 256 scalars (~2,000
    characters; lowering/passes/register_tiles.py)."""
    for stage, text in list(stages(name).items())[1:-1]:
        longest = max(text.splitlines(), key=len)
        assert len(longest) <= 300, (stage, longest[:200])


def test_segment_sizes_are_one_entry_per_operand_group() -> None:
    """A reduce (inputs..., init_values...) says how many operands each group has; an op with
    one variadic group (a tuple, a sort) and a multi-result op need no segment attribute."""
    text = stages("reduce")["hlo"]
    assert re.findall(r"\w+SegmentSizes = array<i32:[^>]*>", text) == [
        "operandSegmentSizes = array<i32: 1, 1>"]
    b = xm.XlaBuilder("sort_tuple")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    i = b.parameter(1, xm.Shape.array(xm.S32, (4,)))
    b.tuple([b.sort([x, i]), x])
    assert "SegmentSizes" not in b.build().as_mlir_text()
