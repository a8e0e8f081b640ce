"""Emission of a recorded graph as an MLIR module in the xhlo dialect.

Each op becomes one `Operation.create` of its registry entry; each
computation becomes a `func.func` whose arguments are the parameters (a
non-default layout is kept as the argument attribute `xhlo.layout`).
Sub-computations become private functions of the same module. Imports
`dialect`.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from mlir import ir
from mlir.dialects import func

from ..dialect.attributes import segment_sizes_attr, to_mlir
from ..dialect.context import charge_context, reused_context
from ..dialect.entry_layouts import has_layout_entry, layout_entry
from ..dialect.errors import ShapeError
from ..dialect.mlir_types import to_mlir_type_text
from ..dialect.registry import ELEMENTS
from ..dialect.shape import Shape
from ..dialect.verify import ENTRY, verify_module
from .xla_op import XlaOp

if TYPE_CHECKING:
    from .recorder import Recorder as XlaBuilder


class _TypeCache:
    def __init__(self) -> None:
        self.types: dict[Shape, ir.Type] = {}

    def __call__(self, shape: Shape) -> ir.Type:
        key = shape.with_default_layout() if shape.is_array() else shape
        t = self.types.get(key)
        if t is None:
            t = self.types[key] = ir.Type.parse(to_mlir_type_text(shape))
        return t


def _location(op: XlaOp) -> ir.Location:
    name = op.opdef.name if op.opdef else f"parameter{op.parameter_number}"
    if op.location is None:
        return ir.Location.name(name)
    filename, line = op.location
    return ir.Location.name(name, childLoc=ir.Location.file(filename, line, 0))


def topological(roots: list[XlaOp]) -> list[XlaOp]:
    """Every op the roots depend on, operands before users."""
    order: list[XlaOp] = []
    seen: set[int] = set()
    stack: list[tuple[XlaOp, bool]] = [(root, False) for root in reversed(roots)]
    while stack:
        op, expanded = stack.pop()
        if expanded:
            order.append(op)
            continue
        if op.uid in seen:
            continue
        seen.add(op.uid)
        stack.append((op, True))
        for operand in reversed(_inputs(op)):
            if operand.uid not in seen:
                stack.append((operand, False))
    return order


def _inputs(op: XlaOp) -> list[XlaOp]:
    if op.source is not None:
        return [op.source]
    flat: list[XlaOp] = []
    for operand in op.operands:
        flat.extend(operand if isinstance(operand, tuple) else (operand,))
    return flat


def side_effects(builder: XlaBuilder) -> list[XlaOp]:
    """Ops that run even when nothing uses their result (XLA keeps them too)."""
    return [op for op in builder.ops if op.opdef is not None
            and (op.opdef.side_effect or op.attrs.get("has_side_effect"))]


def check_parameters(builder: XlaBuilder) -> list[XlaOp]:
    numbers = sorted(builder.parameters)
    if numbers != list(range(len(numbers))):
        raise ShapeError("build", [], f"parameter numbers of {builder.name!r} must be 0..n-1 "
                         f"without gaps, got {numbers}")
    return [builder.parameters[n] for n in numbers]


class ModuleEmitter:
    """Emits one entry computation and its sub-computations into a fresh module (in the
    thread's reusable context)."""

    def __init__(self) -> None:
        self.context = reused_context()
        self.types = _TypeCache()
        with self.context, ir.Location.unknown():
            self.module = ir.Module.create()
        self.symbols: dict[int, str] = {}  # id of a sub-computation -> its symbol name

    def emit_function(self, name: str, params: list[XlaOp], root: XlaOp, *,
                      private: bool = False) -> None:
        with self.context, ir.Location.unknown(), ir.InsertionPoint(self.module.body):
            arg_types = [self.types(p.shape) for p in params]
            result_type = self.types(root.shape)
            f = func.FuncOp(name, ir.FunctionType.get(arg_types, [result_type]))
            if private:
                f.attributes["sym_visibility"] = ir.StringAttr.get("private")
            self._set_layout_attrs(f, params, root)
            block = f.add_entry_block()
            values: dict[int, ir.Value] = {p.uid: block.arguments[i] for i, p in enumerate(params)}
            with ir.InsertionPoint(block):
                for op in topological([*side_effects(root.builder), root]):
                    if op.uid in values:
                        continue
                    if op.parameter_number is not None:
                        raise ShapeError("build", [op.shape], f"parameter {op.parameter_number} "
                                         f"of builder {op.builder.name!r} is used by a computation "
                                         "it does not belong to")
                    values[op.uid] = self._emit_op(op, values)
                func.ReturnOp([values[root.uid]])

    def _set_layout_attrs(self, f: Any, params: list[XlaOp], root: XlaOp) -> None:
        if any(has_layout_entry(p.shape) for p in params):
            f.arg_attrs = ir.ArrayAttr.get([layout_entry(p.shape) for p in params])
        # A tuple result's leaf layouts follow from the parameters it returns (the boundary's
        # `entry_result_shape`); only an array result states its own.
        if root.shape.is_array() and has_layout_entry(root.shape):
            f.result_attrs = ir.ArrayAttr.get([layout_entry(root.shape)])

    def _emit_op(self, op: XlaOp, values: dict[int, ir.Value]) -> ir.Value:
        if op.source is not None:
            # The index-th result of a multi-result op.
            return values[op.source.uid].owner.results[op.index]
        opdef = op.opdef
        assert opdef is not None
        operands: list[ir.Value] = []
        sizes: list[int] = []
        for spec, operand in zip(opdef.operands, op.operands):
            group = [values[o.uid] for o in operand] if spec.variadic else [values[operand.uid]]
            operands.extend(group)
            sizes.append(len(group))
        attributes = segment_sizes_attr(opdef, sizes)
        for attr_name, kind in opdef.attrs.items():
            shape = op.shape if kind is ELEMENTS else None
            attributes[attr_name] = to_mlir(kind, op.attrs[attr_name], shape)
        for comp_name in opdef.computations:
            comp = op.attrs[comp_name]
            if isinstance(comp, (list, tuple)):  # e.g. the branches of a conditional
                attributes[comp_name] = ir.ArrayAttr.get(
                    [ir.FlatSymbolRefAttr.get(self.computation_symbol(c)) for c in comp])
            else:
                attributes[comp_name] = ir.FlatSymbolRefAttr.get(self.computation_symbol(comp))
        if opdef.results is None:
            result_types = [self.types(s) for s in op.shape.tuple_shapes]
        else:
            result_types = [self.types(op.shape)]
        created = ir.Operation.create(opdef.full_name, results=result_types, operands=operands,
                                      attributes=attributes, loc=_location(op))
        return created.results[0]

    def computation_symbol(self, computation: Any) -> str:
        """The private function holding `computation`, emitted on first use."""
        key = id(computation)
        if key in self.symbols:
            return self.symbols[key]
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in computation.name) or "comp"
        existing = {str(op.attributes["sym_name"]).strip('"') for op in self.module.body.operations}
        name = base
        for i in itertools.count(1):
            if name not in existing and name != ENTRY:
                break
            name = f"{base}_{i}"
        self.symbols[key] = name
        computation.emit_into(self, name)
        return name

    def text(self) -> tuple[str, str]:
        """The module's text, without and with source locations."""
        self.module.operation.verify()  # the func ops; xhlo ops are unregistered
        verify_module(self.module, shape_rules=False)
        text = str(self.module)
        charge_context(self.context, len(text))
        return text, self.module.operation.get_asm(enable_debug_info=True)
