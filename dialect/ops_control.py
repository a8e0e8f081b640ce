"""Computations and control flow: call, composite_call, map, while, conditional (case), scan,
optimization_barrier.

A sub-computation reaches a shape rule as its program shape
`(parameter_shapes, result_shape)`. Imports `dialect.registry`,
`dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import I64_ARRAY, INT, STR, OpDef, Operand, define
from .shape import Shape

ProgramShape = tuple[list[Shape], Shape]


def _plain(shape: Shape) -> Shape:
    """The shape without layouts, inside tuples too: XLA compares computation shapes so."""
    return shape.with_default_layout() if shape.is_array() or shape.is_tuple() else shape


def _same(a: Shape, b: Shape) -> bool:
    return _plain(a) == _plain(b)


def _show(shapes: list[Shape]) -> str:
    return "(" + ", ".join(map(str, shapes)) + ")"


def infer_call(operands: tuple[Shape, ...], *, to_apply: ProgramShape) -> Shape:
    params, result = to_apply
    if len(params) != len(operands) or not all(map(_same, params, operands)):
        raise ShapeError("call", list(operands), f"the computation takes {_show(params)}")
    return _plain(result)


def infer_composite_call(operands: tuple[Shape, ...], *, to_apply: ProgramShape, name: str,
                         composite_attributes: str, version: int) -> Shape:
    if not name:
        raise ShapeError("composite_call", list(operands), "the composite needs a name (e.g. "
                         "\"foo.bar\")")
    if version < 0:
        raise ShapeError("composite_call", list(operands), f"version must be >= 0, got {version}")
    params, result = to_apply
    if len(params) != len(operands) or not all(map(_same, params, operands)):
        raise ShapeError("composite_call", list(operands),
                         f"the decomposition takes {_show(params)}")
    return _plain(result)


def infer_map(operands: tuple[Shape, ...], *, dimensions: tuple[int, ...],
              computation: ProgramShape) -> Shape:
    shapes = list(operands)
    if not shapes:
        raise ShapeError("map", [], "map needs at least one operand")
    first = shapes[0]
    for s in shapes:
        if not s.is_array() or s.dimensions != first.dimensions:
            raise ShapeError("map", shapes, "operands must be arrays of the same dimensions")
    if tuple(dimensions) != tuple(range(first.rank)):
        raise ShapeError("map", shapes, f"dimensions {tuple(dimensions)} must be all of the "
                         f"operands' dimensions in order, {tuple(range(first.rank))}")
    params, result = computation
    scalars = [Shape.array(s.element_type, ()) for s in shapes]
    if len(params) != len(scalars) or not all(map(_same, params, scalars)):
        raise ShapeError("map", shapes, f"the computation takes {_show(params)}; it must take "
                         f"one scalar per operand {_show(scalars)}")
    if not result.is_array() or result.rank != 0:
        raise ShapeError("map", shapes, f"the computation must return a scalar, not {result}")
    return Shape.array(result.element_type, first.dimensions)


def infer_while(init: Shape, *, cond: ProgramShape, body: ProgramShape) -> Shape:
    cond_params, cond_result = cond
    body_params, body_result = body
    if len(cond_params) != 1 or not _same(cond_params[0], init):
        raise ShapeError("while", [init], f"the condition takes {_show(cond_params)}, "
                         f"not the loop state {init}")
    if cond_result != Shape.array(PrimitiveType.PRED, ()):
        raise ShapeError("while", [init], f"the condition must return pred[], not {cond_result}")
    if len(body_params) != 1 or not _same(body_params[0], init):
        raise ShapeError("while", [init], f"the body takes {_show(body_params)}, "
                         f"not the loop state {init}")
    if not _same(body_result, init):
        raise ShapeError("while", [init], f"the body returns {body_result}; the loop state "
                         f"{init} must keep its shape")
    return _plain(init)


def infer_case(index: Shape, operands: tuple[Shape, ...], *,
               branches: list[ProgramShape]) -> Shape:
    shapes = [index, *operands]
    if not index.is_array() or index.rank != 0 or index.element_type not in (
            PrimitiveType.PRED, PrimitiveType.S32):
        raise ShapeError("conditional", shapes, "the branch index must be a pred[] or s32[] scalar")
    if not branches:
        raise ShapeError("conditional", shapes, "at least one branch computation is needed")
    if index.element_type == PrimitiveType.PRED and len(branches) != 2:
        raise ShapeError("conditional", shapes, "a pred branch index needs exactly two branches "
                         "(true_computation, false_computation)")
    if len(operands) != len(branches):
        raise ShapeError("conditional", shapes, f"{len(branches)} branches need as many operands, "
                         f"got {len(operands)}")
    result = None
    for i, ((params, branch_result), operand) in enumerate(zip(branches, operands, strict=True)):
        if len(params) != 1 or not _same(params[0], operand):
            raise ShapeError("conditional", shapes, f"branch {i} takes {_show(params)}, but its "
                             f"operand is {operand}")
        if result is not None and not _same(branch_result, result):
            raise ShapeError("conditional", shapes, f"branch {i} returns {branch_result}, branch 0 "
                             f"returns {result}: all branches must return the same shape")
        result = result or branch_result
    assert result is not None
    return _plain(result)


def infer_optimization_barrier(operand: Shape) -> Shape:
    return _plain(operand)


define(OpDef("call", (Operand("operands", variadic=True),), {}, infer_call,
             doc="Call a computation (spec#call).", computations=("to_apply",)))
define(OpDef("composite_call", (Operand("operands", variadic=True),),
             {"name": STR, "composite_attributes": STR, "version": INT}, infer_composite_call,
             doc="A named composite op: means a call of its decomposition; name, attributes and "
                 "version are kept for backends (spec#composite).", computations=("to_apply",)))
define(OpDef("map", (Operand("operands", variadic=True),), {"dimensions": I64_ARRAY}, infer_map,
             doc="Apply a scalar computation elementwise (spec#map).",
             computations=("computation",)))
define(OpDef("while", (Operand("init"),), {}, infer_while,
             doc="Loop while the condition holds (spec#while).", computations=("cond", "body")))
define(OpDef("case", (Operand("index"), Operand("branch_operands", variadic=True)), {}, infer_case,
             doc="Run one branch chosen by an index or a predicate (spec#case).",
             computations=("branches",)))
define(OpDef("optimization_barrier", (Operand("operand"),), {}, infer_optimization_barrier,
             doc="Identity that blocks moving work across it (spec#optimization_barrier)."))
