"""Lowering of tokens and I/O: calls of runtime-bound functions, in program order.

A token becomes an empty placeholder value: the calls stay in the order the
builder emitted them, which follows the tokens' dependencies. infeed/outfeed
bind to the executable's queues, send/recv to the process's channels
(`runtime.io`). Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

from mlir import ir
from mlir.dialects import tensor

from ...dialect.shape import Shape
from ..patterns.framework import OpView, lowers
from ..patterns.tuples import rebuild_tuple
from .custom import array_leaves, runtime_call

INFEED, OUTFEED, SEND, RECV = "xlamlir.infeed", "xlamlir.outfeed", "xlamlir.send", "xlamlir.recv"


def _token() -> ir.Value:
    return tensor.EmptyOp([0], ir.IntegerType.get_signless(8)).result


def _data(v: OpView, tensors: list[ir.Value], shape: Shape) -> ir.Value:
    return rebuild_tuple(tensors, v.op.results[0].type) if shape.is_tuple() else tensors[0]


@lowers("create_token", "after_all")
def lower_token(v: OpView) -> ir.Value:
    return _token()


@lowers("infeed")
def lower_infeed(v: OpView) -> ir.Value:
    shape = Shape.parse(v.attrs["shape"])
    leaves = shape.flatten() if shape.is_tuple() else [shape]
    return _data(v, runtime_call(v, INFEED, v.attrs["shape"], [], leaves), shape)


@lowers("recv")
def lower_recv(v: OpView) -> ir.Value:
    shape = Shape.parse(v.attrs["shape"])
    leaves = shape.flatten() if shape.is_tuple() else [shape]
    return _data(v, runtime_call(v, RECV, v.attrs["channel"], [], leaves), shape)


@lowers("outfeed")
def lower_outfeed(v: OpView) -> ir.Value:
    runtime_call(v, OUTFEED, v.attrs["shape_with_layout"], array_leaves([v.op.operands[0]]), [])
    return _token()


@lowers("send")
def lower_send(v: OpView) -> ir.Value:
    runtime_call(v, SEND, v.attrs["channel"], array_leaves([v.op.operands[0]]), [])
    return _token()
