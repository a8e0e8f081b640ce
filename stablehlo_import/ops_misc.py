"""RNG, custom calls, tokens and I/O, collectives."""

from __future__ import annotations

from typing import Any

import numpy as np
from jaxlib.mlir.dialects import stablehlo as shlo

from ..builder import XlaOp
from ..dialect.shape import Shape
from .importer import OpContext, handles
from .types import Unsupported

# Custom-call targets that jax emits for XLA:CPU (LAPACK) are expanded into builder ops by
# `lapack.py`; it registers itself here: target name -> handler.
KNOWN_TARGETS: dict[str, Any] = {}


@handles("stablehlo.rng")
def rng(cx: OpContext) -> XlaOp:
    a, b = cx.operands[:2]
    distribution = cx.enum("rng_distribution")
    shape = cx.result_shape
    if distribution == "UNIFORM":
        return cx.b.rng_uniform(a, b, shape)
    if distribution == "NORMAL":
        return cx.b.rng_normal(a, b, shape)
    raise Unsupported(f"unknown rng_distribution {distribution!r}")


@handles("stablehlo.rng_bit_generator")
def rng_bit_generator(cx: OpContext) -> list[XlaOp]:
    result = cx.b.rng_bit_generator(cx.enum("rng_algorithm", "DEFAULT"), cx.operands[0],
                                    cx.result_shapes[1])
    return cx.unpack(result, 2)


def _backend_config(cx: OpContext) -> str:
    attr = cx.attr("backend_config")
    if attr is None:
        return ""
    return attr.value if hasattr(attr, "value") and isinstance(attr.value, str) else str(attr)


@handles("stablehlo.custom_call")
def custom_call(cx: OpContext) -> list[XlaOp]:
    target = cx.str("call_target_name")
    if target in KNOWN_TARGETS:
        return KNOWN_TARGETS[target](cx)
    shapes = cx.result_shapes
    shape = shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)
    result = cx.b.custom_call(target, cx.operands, shape, opaque=_backend_config(cx),
                              has_side_effect=cx.bool("has_side_effect"))
    return [] if not shapes else cx.unpack(result, len(shapes))


# -- tokens and I/O ---------------------------------------------------------------------------

@handles("stablehlo.create_token")
def create_token(cx: OpContext) -> XlaOp:
    return cx.b.create_token()


@handles("stablehlo.after_all")
def after_all(cx: OpContext) -> XlaOp:
    tokens = cx.operands
    return cx.b.after_all(tokens) if tokens else cx.b.create_token()


def _data_shape(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)


def _channel(cx: OpContext) -> int | None:
    attr = cx.attr("channel_handle")
    if attr is None:
        return None
    handle = int(shlo.ChannelHandle(attr).handle)
    return handle if handle > 0 else None


@handles("stablehlo.infeed")
def infeed(cx: OpContext) -> list[XlaOp]:
    token = cx.operands[0]
    data_shapes = cx.result_shapes[:-1]
    data = cx.b.infeed(_data_shape(data_shapes), token)
    # The builder's infeed returns the data; the token result orders what comes after it.
    return cx.unpack(data, len(data_shapes)) + [cx.b.after_all([token])]


@handles("stablehlo.outfeed")
def outfeed(cx: OpContext) -> XlaOp:
    *inputs, token = cx.operands
    operand = inputs[0] if len(inputs) == 1 else cx.b.tuple(inputs)
    return cx.b.outfeed(operand, operand.shape, cx.str("outfeed_config"), token)


@handles("stablehlo.send")
def send(cx: OpContext) -> XlaOp:
    *inputs, token = cx.operands
    operand = inputs[0] if len(inputs) == 1 else cx.b.tuple(inputs)
    return cx.b.send(operand, _channel(cx) or 0, token)


@handles("stablehlo.recv")
def recv(cx: OpContext) -> list[XlaOp]:
    token = cx.operands[0]
    data_shapes = cx.result_shapes[:-1]
    data = cx.b.recv(_data_shape(data_shapes), _channel(cx) or 0, token)
    return cx.unpack(data, len(data_shapes)) + [cx.b.after_all([token])]


# -- collectives ------------------------------------------------------------------------------

def _groups(cx: OpContext) -> list[list[int]] | None:
    attr = cx.attr("replica_groups")
    if attr is None:
        return None
    groups = np.array(attr)
    if groups.size == 0:
        return None
    # Groups of unequal sizes are padded with -1 (StableHLO spec).
    return [[int(r) for r in row if r >= 0] for row in groups.reshape(groups.shape[0], -1)]


@handles("stablehlo.replica_id")
def replica_id(cx: OpContext) -> XlaOp:
    return cx.b.replica_id()


@handles("stablehlo.partition_id")
def partition_id(cx: OpContext) -> XlaOp:
    return cx.b.partition_id()


@handles("stablehlo.all_reduce")
def all_reduce(cx: OpContext) -> list[XlaOp]:
    operands = cx.operands
    n = len(operands)
    result = cx.b.all_reduce(operands[0] if n == 1 else operands, cx.closed(0, "all_reduce"),
                             _groups(cx), _channel(cx))
    return cx.unpack(result, n)


@handles("stablehlo.reduce_scatter")
def reduce_scatter(cx: OpContext) -> XlaOp:
    operand = cx.operands[0]
    dim = cx.int("scatter_dimension")
    shards = operand.shape.dimensions[dim] // max(cx.result_shape.dimensions[dim], 1)
    return cx.b.reduce_scatter(operand, cx.closed(0, "reduce_scatter"), dim, shards, _groups(cx),
                               _channel(cx))


@handles("stablehlo.all_gather")
def all_gather(cx: OpContext) -> list[XlaOp]:
    dim = cx.int("all_gather_dim")
    out = []
    for operand, shape in zip(cx.operands, cx.result_shapes):
        shards = shape.dimensions[dim] // max(operand.shape.dimensions[dim], 1)
        out.append(cx.b.all_gather(operand, dim, shards, _groups(cx), _channel(cx)))
    return out


@handles("stablehlo.all_to_all")
def all_to_all(cx: OpContext) -> list[XlaOp]:
    return [cx.b.all_to_all(operand, cx.int("split_dimension"), cx.int("concat_dimension"),
                            cx.int("split_count"), _groups(cx), _channel(cx))
            for operand in cx.operands]


@handles("stablehlo.collective_permute")
def collective_permute(cx: OpContext) -> XlaOp:
    pairs = np.array(cx.attr("source_target_pairs")).reshape(-1, 2)
    return cx.b.collective_permute(cx.operands[0], [(int(s), int(t)) for s, t in pairs], _channel(cx))


@handles("stablehlo.collective_broadcast")
def collective_broadcast(cx: OpContext) -> XlaOp:
    return cx.b.collective_broadcast(cx.operands[0], _groups(cx), _channel(cx))




@handles("stablehlo.cross-replica-sum")
def cross_replica_sum(cx: OpContext) -> XlaOp:
    return cx.b.cross_replica_sum(cx.operands[0], _groups(cx))


# -- sharding annotations ------------------------------------------------------------------------
# Placement hints for a partitioner: values are unchanged (xlamlir runs one partition).

@handles("sdy.sharding_constraint", "sdy.reshard")
def sharding_constraint(cx: OpContext) -> XlaOp:
    return cx.operands[0]


def _sharding_call(cx: OpContext) -> list[XlaOp]:
    return cx.operands


for _target in ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape"):
    KNOWN_TARGETS[_target] = _sharding_call
