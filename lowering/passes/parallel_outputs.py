"""No all-parallel linalg.generic reads its output before elementwise fusion.

`linalg-fuse-elementwise-ops` fuses an all-parallel producer into a broadcasting
consumer by keeping the producer's output, indexed through the broadcast's map,
as the fused op's output. When the producer's body reads that output (an
"accumulator" that is in fact read once), the fused loops update it once per
consumer element: an outer product broadcast 3 times gave x*y, 2x*y, 3x*y, and a
one-cell reduce_window gave 1, 2, 3 (both found by the differential fuzzer).

`outputs_as_inputs` rewrites every such generic before fusion: a read of an
output initialised by `linalg.fill` becomes the fill's scalar; any other read
output becomes an input (read through the same indexing map) and the output a
fresh `tensor.empty`. The values computed are the same; fusion then has nothing
to keep. Imports generic_attrs.
"""

from __future__ import annotations

from typing import Any

from mlir import ir
from mlir.dialects import linalg, tensor

from .generic_attrs import all_parallel


def _read_outputs(generic: Any) -> list[int]:
    """Positions (among the outputs) whose block argument the body uses."""
    block = generic.regions[0].blocks[0]
    inputs = len(generic.operands) - len(generic.results)
    return [k for k, arg in enumerate(list(block.arguments)[inputs:])
            if next(iter(arg.uses), None) is not None]


def outputs_as_inputs(op: Any, pass_: Any) -> None:
    """See the module docstring."""
    found: list[Any] = []

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name == "linalg.generic" and len(inner.results) and all_parallel(inner) \
                and _read_outputs(inner):
            found.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for generic in found:
        _substitute_fills(generic)
        if _read_outputs(generic):
            _rebuild_with_inputs(generic)


def _substitute_fills(generic: Any) -> None:
    block = generic.regions[0].blocks[0]
    inputs = len(generic.operands) - len(generic.results)
    for k in _read_outputs(generic):
        init = generic.operands[inputs + k]
        owner = init.owner
        if isinstance(owner, ir.Block) or owner.operation.name != "linalg.fill":
            continue
        scalar = owner.operation.operands[0]
        if scalar.type == block.arguments[inputs + k].type:
            block.arguments[inputs + k].replace_all_uses_with(scalar)


def _rebuild_with_inputs(generic: Any) -> None:
    """The same generic with every read output also passed as an input."""
    block = generic.regions[0].blocks[0]
    operands = list(generic.operands)
    inputs = len(operands) - len(generic.results)
    ins, outs = operands[:inputs], operands[inputs:]
    maps = list(ir.ArrayAttr(generic.attributes["indexing_maps"]))
    read = _read_outputs(generic)
    with ir.InsertionPoint(generic), generic.location:
        fresh = []
        for k, init in enumerate(outs):
            t = ir.RankedTensorType(init.type)
            if k in read and t.has_static_shape:
                fresh.append(tensor.EmptyOp(list(t.shape), t.element_type).result)
            else:
                fresh.append(init)
        read = [k for k in read if fresh[k] is not outs[k]]
        if not read:
            return
        new = linalg.GenericOp(
            [r.type for r in generic.results], ins + [outs[k] for k in read], fresh,
            ir.ArrayAttr.get(maps[:inputs] + [maps[inputs + k] for k in read] + maps[inputs:]),
            generic.attributes["iterator_types"])
    for name in ("doc", "library_call"):
        if name in generic.attributes:
            new.attributes[name] = generic.attributes[name]
    old_args = list(block.arguments)
    types = [a.type for a in old_args[:inputs]] + [old_args[inputs + k].type for k in read] + \
        [a.type for a in old_args[inputs:]]
    new_block = new.regions[0].blocks.append(*types)
    new_args = list(new_block.arguments)
    for i in range(inputs):
        old_args[i].replace_all_uses_with(new_args[i])
    for j, k in enumerate(read):  # the body reads the input copy of the output
        old_args[inputs + k].replace_all_uses_with(new_args[inputs + j])
    for k in range(len(outs)):
        old_args[inputs + k].replace_all_uses_with(new_args[inputs + len(read) + k])
    for inner in list(block.operations):
        inner.detach_from_parent()
        new_block.append(inner)
    for old, replacement in zip(generic.results, new.results, strict=True):
        old.replace_all_uses_with(replacement)
    generic.erase()
