"""Verification of modules given as text: every xhlo op's shape rule is re-run.

MLIR's own verifier only checks what IRDL can express (operand counts and
attribute presence); this checks shapes, dtypes and attributes exactly as the
builder would have. Imports the other `dialect` modules.
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .attributes import attribute_values, operand_groups
from .entry_layouts import LAYOUT_ATTR, with_entry_layouts
from .errors import CompileError, ShapeError, XlaError
from .mlir_types import shape_from_mlir_type_text
from .registry import DIALECT, ENTRY, lookup
from .shape import Shape

__all__ = ["LAYOUT_ATTR", "program_shape_of", "verify_module", "verify_op"]


def _shape(t: ir.Type) -> Shape:
    return shape_from_mlir_type_text(str(t))


def verify_op(op: ir.Operation) -> None:
    opdef = lookup(op.name)
    groups = operand_groups(opdef, op)
    shapes = [[_shape(v.type) for v in g] if isinstance(g, list) else _shape(g.type)
              for g in groups.values()]
    shapes = [tuple(s) if isinstance(s, list) else s for s in shapes]
    attrs = attribute_values(opdef, op)
    for name in opdef.computations:
        symbols = attrs[name]
        attrs[name] = ([_callee_program_shape(op, s) for s in symbols] if isinstance(symbols, list)
                       else _callee_program_shape(op, symbols))
    results = [_shape(r.type) for r in op.results]
    if opdef.name == "constant":
        attrs["shape"] = results[0]  # a constant's type is its result's; the rule checks the data
    inferred = opdef.infer(*shapes, **attrs)
    expected = list(inferred.tuple_shapes) if opdef.results is None else [inferred]
    expected = [s.with_default_layout() if s.is_array() else s for s in expected]
    if results != expected:
        raise ShapeError(opdef.name, [s for s in shapes if isinstance(s, Shape)],
                         f"result type {', '.join(map(str, results))} does not match the "
                         f"inferred {', '.join(map(str, expected))}")


def _callee_program_shape(op: ir.Operation, symbol: str) -> tuple[list[Shape], Shape]:
    """Program shape of the private function `symbol` of the module holding `op`."""
    parent = op
    while parent.parent is not None:
        parent = parent.parent
    for f in parent.regions[0].blocks[0].operations:
        if f.operation.name == "func.func" and ir.StringAttr(f.attributes["sym_name"]).value == symbol:
            ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
            if len(ftype.results) != 1:
                raise ShapeError(op.name, [], f"computation @{symbol} must return one value")
            return [_shape(t) for t in ftype.inputs], _shape(ftype.results[0])
    raise ShapeError(op.name, [], f"no function @{symbol} in the module")


def verify_module(module: ir.Module) -> None:
    """Raise CompileError naming the op and its location for the first op that is wrong."""
    errors: list[str] = []

    def visit(op: Any) -> ir.WalkResult:
        if not op.name.startswith(DIALECT + "."):
            return ir.WalkResult.ADVANCE
        try:
            verify_op(op)
        except (XlaError, KeyError, ValueError, TypeError) as e:
            errors.append(f"{op.location}: {e}")
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    if errors:
        raise CompileError(f"invalid module: {errors[0]}", "hlo", errors[0])
    program_shape_of(module)


def _entry(module: ir.Module) -> Any:
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == ENTRY:
            return op
    raise CompileError(f"the module has no function @{ENTRY}", "hlo")


def program_shape_of(module: ir.Module) -> tuple[list[Shape], Shape]:
    """Parameter shapes and result shape (with layouts) of the module's entry function."""
    f = _entry(module)
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    arg_attrs = f.attributes["arg_attrs"] if "arg_attrs" in f.attributes else None
    res_attrs = f.attributes["res_attrs"] if "res_attrs" in f.attributes else None
    if len(ftype.results) != 1:
        raise CompileError(f"@{ENTRY} must return exactly one value (use a tuple)", "hlo")
    try:
        params = [with_entry_layouts(_shape(t), arg_attrs, i) for i, t in enumerate(ftype.inputs)]
        if any(leaf.is_token() for p in params for leaf in (p.flatten() if p.is_tuple() else [p])):
            raise ShapeError("main", params, "the entry computation cannot take a token parameter; "
                             "make one with create_token()")
        result = with_entry_layouts(_shape(ftype.results[0]), res_attrs, 0)
    except ShapeError as e:
        raise CompileError(f"unsupported entry signature: {e}", "hlo") from None
    return params, result
