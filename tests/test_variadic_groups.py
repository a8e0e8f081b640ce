"""Variadic operand groups of xhlo ops: any number of values of any types in one group (the
ops are unregistered in MLIR, `dialect/context.py`), a compact per-group count where an op has
several groups, and the registry verifier's messages for modules given as text."""

from __future__ import annotations

import re

import numpy as np
import pytest
from mlir import ir

import xlamlir as xm

F32, S32 = xm.F32, xm.S32


def test_tuple_of_40_differently_shaped_arrays() -> None:
    """40 runs of differently typed values in one variadic group (an IRDL definition with one
    variadic segment per run of equal types had a limit of 32)."""
    b = xm.XlaBuilder("wide_tuple")
    x = b.parameter(0, xm.Shape.array(F32, (2,)))
    y = b.parameter(1, xm.Shape.array(S32, (3,)))
    b.tuple([x + float(k) if k % 2 == 0 else y * k for k in range(40)])
    comp = b.build()
    text = comp.as_mlir_text()
    assert "SegmentSizes" not in text
    assert "tuple(" in comp.as_hlo_text()
    xv, yv = np.array([1.5, -2.0], np.float32), np.array([1, 2, 3], np.int32)
    got = xm.compile(comp)(xv, yv)
    assert len(got) == 40
    for k, value in enumerate(got):
        np.testing.assert_array_equal(value, xv + k if k % 2 == 0 else yv * k)


def _alternating(n: int, shape: tuple[int, ...]) -> tuple[list[xm.Shape], list[np.ndarray]]:
    rng = np.random.default_rng(n)
    shapes = [xm.Shape.array(F32 if k % 2 == 0 else S32, shape) for k in range(n)]
    values = [rng.permutation(np.prod(shape)).reshape(shape).astype(np.float32 if k % 2 == 0 else np.int32)
              for k in range(n)]
    return shapes, values


def test_variadic_reduce_of_34_alternately_typed_operands() -> None:
    n = 34
    shapes, values = _alternating(n, (3, 5))
    b = xm.XlaBuilder("wide_reduce")
    params = [b.parameter(k, s) for k, s in enumerate(shapes)]
    inits = [np.float32(0) if k % 2 == 0 else np.int32(0) for k in range(n)]
    b.reduce(params, inits, lambda *ps: [ps[k] + ps[n + k] for k in range(n)], [1])
    comp = b.build()
    sizes = re.findall(r"operandSegmentSizes = array<i32: ([^>]*)>", comp.as_mlir_text())
    assert sizes == [f"{n}, {n}"]
    got = xm.compile(comp)(*values)
    for value, expected in zip(got, values, strict=True):
        np.testing.assert_array_equal(value, expected.sum(axis=1))


def test_sort_of_33_alternately_typed_operands() -> None:
    n = 33
    shapes, values = _alternating(n, (7,))
    b = xm.XlaBuilder("wide_sort")
    b.sort([b.parameter(k, s) for k, s in enumerate(shapes)])
    got = xm.compile(b.build())(*values)
    order = np.argsort(values[0], kind="stable")  # the keys are distinct
    for value, expected in zip(got, values, strict=True):
        np.testing.assert_array_equal(value, expected[order])


def _reduce_text() -> str:
    b = xm.XlaBuilder("r")
    x = b.parameter(0, xm.Shape.array(F32, (3, 4)))
    i = b.parameter(1, xm.Shape.array(S32, (3, 4)))
    b.reduce([x, i], [np.float32(0), np.int32(0)], lambda a, c, v, w: [a + v, c + w], [1])
    return b.build().as_mlir_text()


def _edited(old: str, new: str) -> str:
    text = _reduce_text()
    assert old in text
    return text.replace(old, new, 1)


ADD = '%0 = "xhlo.add"(%arg0, %arg2)'
BAD_TEXTS = [
    ("segment-sum", lambda: _edited("array<i32: 2, 2>", "array<i32: 2, 3>"),
     r"xhlo\.reduce: operandSegmentSizes .* is \[2, 3\], which sums to 5, but the op has 4"),
    ("segment-entries", lambda: _edited("array<i32: 2, 2>", "array<i32: 4>"),
     r"xhlo\.reduce: operandSegmentSizes \(one operand count per group: inputs\.\.\., "
     r"init_values\.\.\.\) is \[4\]"),
    ("segment-missing", lambda: _edited(", operandSegmentSizes = array<i32: 2, 2>", ""),
     r"xhlo\.reduce: needs the attribute operandSegmentSizes"),
    ("segment-kind", lambda: _edited("array<i32: 2, 2>", "array<i64: 2, 2>"),
     r"xhlo\.reduce: operandSegmentSizes .* must be an array<i32: \.\.\.>"),
    ("unknown-op", lambda: _edited('"xhlo.tuple"', '"xhlo.tupel"'),
     r"xhlo\.tupel: unknown op: the xhlo dialect has no op 'tupel'"),
    ("other-dialect", lambda: _edited('"xhlo.tuple"', '"foo.tuple"'), r"unknown op 'foo\.tuple'"),
    ("missing-attr", lambda: _edited("dimensions = array<i64: 1>, ", ""),
     r"xhlo\.reduce: missing attribute 'dimensions' \(array<i64: \.\.\.>\)"),
    ("attr-kind", lambda: _edited("dimensions = array<i64: 1>", "dimensions = 1 : i64"),
     r"xhlo\.reduce: attribute 'dimensions' must be array<i64: \.\.\.>, got 1 : i64"),
    ("computation-kind", lambda: _edited("computation = @r_reduce_computation",
                                         'computation = "r_reduce_computation"'),
     r"xhlo\.reduce: attribute 'computation' must be a symbol"),
    ("unknown-attr", lambda: _edited("dimensions = array<i64: 1>", "dimensions = array<i64: 1>, "
                                     "dimension = array<i64: 1>"),
     r"xhlo\.reduce: unknown attribute dimension \(it takes: computation, dimensions, "
     r"operandSegmentSizes\)"),
    ("operand-count", lambda: _edited(ADD + " : (tensor<f32>, tensor<f32>)",
                                      '%0 = "xhlo.add"(%arg0, %arg2, %arg0) : '
                                      "(tensor<f32>, tensor<f32>, tensor<f32>)"),
     r"xhlo\.add: takes 2 operands \(lhs, rhs\), got 3"),
    ("result-count", lambda: _edited(ADD + " : (tensor<f32>, tensor<f32>) -> tensor<f32>",
                                     '%0, %extra = "xhlo.add"(%arg0, %arg2) : '
                                     "(tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)"),
     r"xhlo\.add: has 1 result, got 2"),
    ("region", lambda: _edited(ADD + " :", ADD + " ({}) :"), r"xhlo\.add: takes no regions"),
]


@pytest.mark.parametrize("name,make,pattern", BAD_TEXTS, ids=[c[0] for c in BAD_TEXTS])
def test_a_wrong_module_names_the_op_and_its_location(name: str, make, pattern: str) -> None:
    with pytest.raises(xm.CompileError) as e:
        xm.compile_mlir(make())
    message = str(e.value)
    assert re.search(r'loc\("-":\d+:\d+\)', message), message
    assert re.search(pattern, message), message


def test_discardable_attributes_of_other_dialects_are_kept() -> None:
    """MLIR's rule: an attribute named `dialect.name` may sit on any op."""
    text = _edited("dimensions = array<i64: 1>", "dimensions = array<i64: 1>, user.note = 1 : i64")
    got = xm.compile_mlir(text)(np.ones((3, 4), np.float32), np.ones((3, 4), np.int32))
    np.testing.assert_array_equal(got[1], np.full(3, 4, np.int32))


def _one_operand_add(op, pass_) -> None:
    """A broken pass: the first xhlo.add loses its second operand."""
    adds = []
    op.walk(lambda inner: (adds.append(inner) if inner.name == "xhlo.add" else None)
            or ir.WalkResult.ADVANCE)
    add = adds[0]
    with ir.InsertionPoint(add), add.location:
        broken = ir.Operation.create("xhlo.add", results=[add.results[0].type],
                                     operands=[add.operands[0]])
    add.results[0].replace_all_uses_with(broken.results[0])
    add.erase()


def test_a_python_pass_breaking_an_xhlo_op_fails_in_its_stage(monkeypatch, tmp_path) -> None:
    """MLIR's verifier skips unregistered ops: the pipeline runs ours after each Python pass
    while xhlo ops remain."""
    monkeypatch.setenv("XLAMLIR_DUMP_TO", str(tmp_path))  # the reproducer's folder
    b = xm.XlaBuilder("broken")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    b.add(x, x)
    with pytest.raises(xm.CompileError) as e:
        xm.compile(b.build(), xm.Pipeline.default().insert_after("hlo", _one_operand_add))
    assert e.value.stage == "hlo"
    assert re.search(r"xhlo\.add: takes 2 operands \(lhs, rhs\), got 1", str(e.value)), str(e.value)


@pytest.mark.parametrize("body,pattern", [
    ('%0 = "xhlo.negate"(%a)[^bb2] : (tensor<f32>) -> tensor<f32>\n^bb2:\n  return %a : tensor<f32>',
     r"xhlo\.negate: takes no successor blocks"),
    ('%0 = "xhlo.negate"(%a) : (tensor<f32>) -> tensor<f32>',
     r"xhlo\.negate ends a block of @main: the block has no terminator"),
], ids=["successor", "no-terminator"])
def test_an_xhlo_op_is_never_a_terminator(body: str, pattern: str) -> None:
    """MLIR lets an unregistered op end a block or branch: ours do neither."""
    text = f"func.func @main(%a: tensor<f32>) -> tensor<f32> {{\n  cf.br ^bb1\n^bb1:\n  {body}\n}}"
    with pytest.raises(xm.CompileError, match=pattern):
        xm.compile_mlir(text)


def test_the_reproducer_of_such_a_pass_fails_the_same_way(monkeypatch, tmp_path) -> None:
    from xlamlir.lowering.reproducer import replay

    monkeypatch.setenv("XLAMLIR_DUMP_TO", str(tmp_path))

    b = xm.XlaBuilder("broken")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    b.add(x, x)
    with pytest.raises(xm.CompileError) as e:
        xm.compile(b.build(), xm.Pipeline.default().insert_after("hlo", _one_operand_add))
    again = replay(e.value.reproducer, _one_operand_add)
    assert again.reproduced and "takes 2 operands" in again.output, again.output
