"""Tokens and I/O: create_token, after_all, infeed, outfeed, send, recv.

Tokens order side effects; they carry no data. Data shapes are kept as
attributes in XLA's text form. Imports `dialect.registry`, `dialect.shape`,
`dialect.errors`.
"""

from __future__ import annotations

from .errors import ShapeError
from .registry import STR, OpDef, Operand, define
from .shape import Shape

TOKEN = Shape.token()


def _tokens(op: str, tokens: tuple[Shape, ...], at_most_one: bool = True) -> None:
    for t in tokens:
        if not t.is_token():
            raise ShapeError(op, list(tokens), f"expected a token, got {t}")
    if at_most_one and len(tokens) > 1:
        raise ShapeError(op, list(tokens), "takes at most one token")


def _data_shape(op: str, text: str, operands: list[Shape]) -> Shape:
    shape = Shape.parse(text)
    leaves = shape.flatten() if shape.is_tuple() else [shape]
    if shape.is_tuple() and any(s.is_tuple() for s in shape.tuple_shapes):
        raise ShapeError(op, operands, f"nested tuples are not supported: {shape}")
    if not all(leaf.is_array() for leaf in leaves):
        raise ShapeError(op, operands, f"data must be an array or a tuple of arrays, got {shape}")
    return shape


def infer_create_token() -> Shape:
    return TOKEN


def infer_after_all(tokens: tuple[Shape, ...]) -> Shape:
    if not tokens:
        raise ShapeError("after_all", [], "AfterAll requires at least one operand (use "
                         "create_token() for a fresh token)")
    _tokens("after_all", tokens, at_most_one=False)
    return TOKEN


def infer_infeed(token: tuple[Shape, ...], *, shape: str, config: str) -> Shape:
    _tokens("infeed", token)
    data = _data_shape("infeed", shape, list(token))
    return data.with_default_layout() if data.is_array() else data


def infer_outfeed(operand: Shape, token: tuple[Shape, ...], *, shape_with_layout: str,
                  outfeed_config: str) -> Shape:
    _tokens("outfeed", token)
    declared = _data_shape("outfeed", shape_with_layout, [operand])
    plain = declared.with_default_layout() if declared.is_array() else declared
    if plain != (operand.with_default_layout() if operand.is_array() else operand):
        raise ShapeError("outfeed", [operand], f"shape_with_layout {declared} does not match the "
                         f"operand")
    return TOKEN


def infer_send(operand: Shape, token: tuple[Shape, ...], *, channel: str) -> Shape:
    _tokens("send", token)
    _data_shape("send", str(operand), [operand])
    return TOKEN


def infer_recv(token: tuple[Shape, ...], *, shape: str, channel: str) -> Shape:
    _tokens("recv", token)
    data = _data_shape("recv", shape, list(token))
    return data.with_default_layout() if data.is_array() else data


define(OpDef("create_token", (), {}, infer_create_token, doc="A fresh token (spec#after_all).",
             side_effect=True))
define(OpDef("after_all", (Operand("tokens", variadic=True),), {}, infer_after_all,
             doc="A token after all the given ones (spec#after_all)."))
define(OpDef("infeed", (Operand("token", variadic=True),), {"shape": STR, "config": STR},
             infer_infeed, doc="The next value of the executable's infeed queue (spec#infeed).",
             side_effect=True))
define(OpDef("outfeed", (Operand("operand"), Operand("token", variadic=True)),
             {"shape_with_layout": STR, "outfeed_config": STR}, infer_outfeed,
             doc="Push a value to the executable's outfeed queue (spec#outfeed).", side_effect=True))
define(OpDef("send", (Operand("operand"), Operand("token", variadic=True)), {"channel": STR},
             infer_send, doc="Send a value on a channel (spec#send).", side_effect=True))
define(OpDef("recv", (Operand("token", variadic=True),), {"shape": STR, "channel": STR},
             infer_recv, doc="Receive a value from a channel (spec#recv).", side_effect=True))
