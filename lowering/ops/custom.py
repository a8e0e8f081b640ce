"""Lowering of custom_call to a call of an external function the runtime provides.

Each call site becomes a private declaration `@xlamlir_custom_<n>(memrefs...)`
with `llvm.emit_c_interface`: the operands' leaves (read in place through
`bufferization.to_buffer`) then one freshly allocated memref per result leaf.
The module attribute `xhlo.custom_calls` lists, per declaration, the target
name, the opaque string and the leaf shapes, so the runtime can bind each
symbol to the registered function. Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import re
from pathlib import Path

from mlir import ir
from mlir.dialects import bufferization, func, memref

from ...dialect.attributes import operand_groups
from ...dialect.mlir_types import to_mlir_type_text
from ...dialect.shape import Shape
from ..patterns.boundary import READ_OPERANDS_ATTR, memref_type
from ..patterns.framework import OpView, cast, lowers, module_of, shape_of, signless_type, to_signless
from ..patterns.tuples import rebuild_tuple, tuple_leaves

CUSTOM_CALLS_ATTR = "xhlo.custom_calls"


def call_sites(module: ir.Operation) -> list[ir.Attribute]:
    """The records of the runtime-bound call sites declared so far (site n is symbol
    `xlamlir_custom_<n>`)."""
    return list(module.attributes[CUSTOM_CALLS_ATTR]) if CUSTOM_CALLS_ATTR in module.attributes else []


def _declare(module: ir.Operation, types: list[ir.Type], record: dict[str, str]) -> str:
    body = module.regions[0].blocks[0]
    existing = call_sites(module)
    symbol = f"xlamlir_custom_{len(existing)}"
    with ir.InsertionPoint.at_block_begin(body), ir.Location.unknown():
        decl = func.FuncOp(symbol, ir.FunctionType.get(types, []), visibility="private")
        decl.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    entry = ir.DictAttr.get({"symbol": ir.StringAttr.get(symbol),
                             **{k: ir.StringAttr.get(v) for k, v in record.items()}})
    module.attributes[CUSTOM_CALLS_ATTR] = ir.ArrayAttr.get(existing + [entry])
    return symbol


_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def _is_library_file(file: str) -> bool:
    """A module of this package: the repository root's own .py files and its sub-packages
    (the root also holds tests/, bench/ and examples/, which are users of it)."""
    try:
        relative = Path(file).resolve().relative_to(_PACKAGE_ROOT)
    except (ValueError, OSError):
        return False
    return len(relative.parts) == 1 or (_PACKAGE_ROOT / relative.parts[0] / "__init__.py").exists()


def source_line(location: ir.Location) -> str:
    """The first `file:line` of `location` outside this library (the user's line of the op,
    also through jax's call-site locations), or ""."""
    for file, line in re.findall(r'"([^"]+)":(\d+)', str(location)):
        if not _is_library_file(file):
            return f"{file}:{line}"
    return ""


def runtime_call(v: OpView, target: str, opaque: str, inputs: list[ir.Value],
                 result_leaves: list[Shape]) -> list[ir.Value]:
    """Call the runtime-bound function for `target` on `inputs` (array leaves, read in
    place) and return one tensor per result leaf (written into fresh buffers)."""
    buffers = []
    for value in inputs:
        buffers.append(bufferization.to_buffer(memref_type(shape_of(value)), to_signless(value),
                                               read_only=True))
    outputs = []
    for leaf in result_leaves:
        layout = None if leaf.has_default_layout() else leaf.layout.minor_to_major
        outputs.append(memref.alloc(memref_type(leaf, layout), [], []))
    record = {
        "target": target,
        "opaque": opaque,
        "inputs": ";".join(str(shape_of(value)) for value in inputs),
        "results": ";".join(str(leaf) for leaf in result_leaves),
        "location": source_line(v.op.location),
    }
    symbol = _declare(module_of(v.op.operation), [b.type for b in buffers + outputs], record)
    call = func.CallOp([], ir.FlatSymbolRefAttr.get(symbol), buffers + outputs)
    # Which operands the call only reads, should canonicalization fold a `to_buffer` of
    # one into the buffer itself (lowering/passes/tensor_reads.py).
    call.attributes[READ_OPERANDS_ATTR] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), len(buffers))
    tensors = []
    for out, leaf in zip(outputs, result_leaves, strict=True):
        tensor_type = signless_type(ir.Type.parse(_tensor_text(leaf)))
        loaded = bufferization.to_tensor(tensor_type, out, restrict=True, writable=True)
        tensors.append(cast(loaded, ir.Type.parse(_tensor_text(leaf))))
    return tensors


def array_leaves(values: list[ir.Value]) -> list[ir.Value]:
    """The array leaves of values (tuples flattened, tokens dropped)."""
    return [leaf for value in values for leaf in tuple_leaves(value)
            if not str(leaf.type).startswith("!xhlo.token")]


@lowers("custom_call")
def lower_custom_call(v: OpView) -> ir.Value:
    inputs = array_leaves(list(operand_groups(v.opdef, v.op.operation)["inputs"]))
    result = Shape.parse(v.attrs["result_shape"])
    result_leaves = result.flatten() if result.is_tuple() else [result]
    tensors = runtime_call(v, v.attrs["call_target_name"], v.attrs["backend_config"], inputs,
                           result_leaves)
    if result.is_tuple():
        return rebuild_tuple(tensors, v.op.results[0].type)
    return tensors[0]


def _tensor_text(shape: Shape) -> str:
    return to_mlir_type_text(shape.with_default_layout())
