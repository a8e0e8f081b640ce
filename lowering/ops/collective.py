"""Lowering of the collective family to calls of the replica runtime (runtime/replicas/).

The data movement of every collective is one call of a runtime function bound
at JIT time (the custom-call mechanism of `lowering/ops/custom.py`, with the
builtin targets `xlamlir.collective.*`); the runtime exchanges the buffers
between the replicas (threads in one process, or MPI ranks). The reduction of
all_reduce and reduce_scatter stays in generated code: the runtime hands back
the group's contributions stacked on a new leading dimension, in group order,
and one `linalg.reduce` over that dimension applies the user's computation as
scalar code, `f(...f(f(x_0, x_1), x_2)...)`, so every replica of a group gets
bit-identical results whatever the computation and element type.

The opaque string of each call is JSON: the collective's kind, its replica
groups (`[]`: all replicas), and its rendezvous key (the channel id when there
is one, else the call site), by which the replicas' calls are matched.
Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import json
from typing import Any

from mlir import ir
from mlir.dialects import tensor

from ...dialect.element_types import PrimitiveType
from ...dialect.errors import CompileError
from ...dialect.ops_collective import parse_replica_groups
from ...dialect.shape import Shape
from ..patterns.computations import current_library
from ..patterns.framework import OpView, lowers, module_of, shape_of
from .custom import call_sites, runtime_call
from .reduce import linalg_reduce

NUM_REPLICAS_ATTR = "xhlo.num_replicas"
TARGET_PREFIX = "xlamlir.collective."


def _num_replicas(v: OpView) -> int:
    module = module_of(v.op.operation)
    if NUM_REPLICAS_ATTR in module.attributes:
        return ir.IntegerAttr(module.attributes[NUM_REPLICAS_ATTR]).value
    return 1


def _opaque(v: OpView, kind: str, **fields: Any) -> str:
    site = len(call_sites(module_of(v.op.operation)))  # the runtime call about to be declared
    channel = v.attrs.get("channel_id", 0)
    key = f"channel {channel}" if channel else f"site {site}"
    return json.dumps({"kind": kind, "key": key, **fields}, separators=(",", ":"))


def _group_size(v: OpView) -> tuple[list[list[int]], int]:
    groups = parse_replica_groups(v.attrs["replica_groups"])
    return groups, (len(groups[0]) if groups else _num_replicas(v))


def _storage_shape(value: ir.Value, dims: tuple[int, ...] | None = None) -> Shape:
    shape = shape_of(value)
    return Shape.array(shape.element_type, shape.dimensions if dims is None else dims)


def _reduce_stacked(v: OpView, stacked: list[ir.Value], count: int) -> list[ir.Value]:
    """Fold the `count` contributions stacked on dimension 0 with the op's computation."""
    if any(0 in ir.RankedTensorType(s.type).shape for s in stacked):  # nothing to reduce
        return [tensor.EmptyOp(list(ir.RankedTensorType(s.type).shape[1:]),
                               ir.RankedTensorType(s.type).element_type).result for s in stacked]
    firsts, rests = [], []
    for value in stacked:
        t = ir.RankedTensorType(value.type)
        dims = list(t.shape[1:])
        rank = len(dims)
        first_type = ir.RankedTensorType.get(dims, t.element_type)
        firsts.append(tensor.extract_slice(first_type, value, [], [], [], [0] * (rank + 1),
                                           [1] + dims, [1] * (rank + 1)))
        if count > 1:
            rest_type = ir.RankedTensorType.get([count - 1] + dims, t.element_type)
            rests.append(tensor.extract_slice(rest_type, value, [], [], [], [1] + [0] * rank,
                                              [count - 1] + dims, [1] * (rank + 1)))
    if count == 1:
        return firsts
    symbol = v.attrs["computation"]
    if len(stacked) > 1 and len(current_library().signature(symbol)[0]) == 2:
        # A binary computation reduces each operand on its own (XLA's tuple all-reduce).
        return [linalg_reduce([r], [f], [0], symbol)[0] for r, f in zip(rests, firsts)]
    return linalg_reduce(rests, firsts, [0], symbol)


@lowers("replica_id", "partition_id")
def lower_replica_id(v: OpView) -> ir.Value:
    kind = v.op.operation.name.removeprefix("xhlo.")
    return runtime_call(v, TARGET_PREFIX + kind, _opaque(v, kind), [],
                        [Shape.array(PrimitiveType.S32, ())])[0]


@lowers("all_reduce")
def lower_all_reduce(v: OpView) -> list[ir.Value]:
    groups, size = _group_size(v)
    inputs = v.args["operands"]
    stacked = runtime_call(v, TARGET_PREFIX + "gather", _opaque(v, "gather", groups=groups),
                           inputs, [_storage_shape(x, (size,) + shape_of(x).dimensions) for x in inputs])
    return _reduce_stacked(v, stacked, size)


@lowers("reduce_scatter")
def lower_reduce_scatter(v: OpView) -> list[ir.Value]:
    groups, size = _group_size(v)
    inputs = v.args["operands"]
    dim = v.attrs["scatter_dimension"]
    leaves = []
    for x in inputs:
        dims = list(shape_of(x).dimensions)
        dims[dim] //= size
        leaves.append(_storage_shape(x, (size, *dims)))
    # Each replica receives block i (its position in the group) of every member's operand.
    stacked = runtime_call(v, TARGET_PREFIX + "scatter_blocks",
                           _opaque(v, "scatter_blocks", groups=groups, dimension=dim),
                           inputs, leaves)
    return _reduce_stacked(v, stacked, size)


@lowers("all_gather")
def lower_all_gather(v: OpView) -> ir.Value:
    groups, _ = _group_size(v)
    x = v.args["operand"]
    return runtime_call(v, TARGET_PREFIX + "all_gather",
                        _opaque(v, "all_gather", groups=groups, dimension=v.attrs["all_gather_dim"]),
                        [x], [_storage_shape(x, v.result_shape.dimensions)])[0]


@lowers("all_to_all")
def lower_all_to_all(v: OpView) -> ir.Value:
    groups, _ = _group_size(v)
    x = v.args["operand"]
    opaque = _opaque(v, "all_to_all", groups=groups, split_dimension=v.attrs["split_dimension"],
                     concat_dimension=v.attrs["concat_dimension"])
    return runtime_call(v, TARGET_PREFIX + "all_to_all", opaque, [x],
                        [_storage_shape(x, v.result_shape.dimensions)])[0]


@lowers("collective_permute")
def lower_collective_permute(v: OpView) -> ir.Value:
    x = v.args["operand"]
    pairs = [list(p) for p in v.attrs["source_target_pairs"]]
    return runtime_call(v, TARGET_PREFIX + "permute", _opaque(v, "permute", pairs=pairs), [x],
                        [_storage_shape(x)])[0]


@lowers("collective_broadcast")
def lower_collective_broadcast(v: OpView) -> ir.Value:
    groups, _ = _group_size(v)
    x = v.args["operand"]
    return runtime_call(v, TARGET_PREFIX + "broadcast", _opaque(v, "broadcast", groups=groups), [x],
                        [_storage_shape(x)])[0]


@lowers("ragged_all_to_all")
def lower_ragged_all_to_all(v: OpView) -> ir.Value:
    groups, size = _group_size(v)
    rows = v.shapes["input_offsets"].dimensions[0]
    if rows != size:  # with explicit groups the shape rule checked this already
        raise CompileError(f"ragged_all_to_all: the offsets and sizes have {rows} rows, one per "
                           f"replica of the group, but the group has {size} replicas", "linalg")
    names = ("input", "output", "input_offsets", "send_sizes", "output_offsets", "recv_sizes")
    inputs = [v.args[name] for name in names]
    output = v.args["output"]
    return runtime_call(v, TARGET_PREFIX + "ragged_all_to_all",
                        _opaque(v, "ragged_all_to_all", groups=groups), inputs,
                        [_storage_shape(output)])[0]
