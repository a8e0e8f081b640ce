"""XlaBuilder methods for tokens and I/O. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..dialect.errors import ShapeError
from ..dialect.shape import Shape
from .builder import XlaBuilder
from .xla_op import XlaOp


def _token(token: XlaOp | None) -> list[XlaOp]:
    return [] if token is None else [token]


def _shape(op: str, shape: Any) -> str:
    if not isinstance(shape, Shape):
        raise ShapeError(op, [], f"shape must be an xm.Shape, got {type(shape).__name__}")
    return str(shape)


def _channel(op: str, channel: Any) -> str:
    if isinstance(channel, bool) or not isinstance(channel, (int, str)):
        raise ShapeError(op, [], f"channel must be an int or a str, got {channel!r}")
    return f"{type(channel).__name__}:{channel}"


def create_token(self: XlaBuilder) -> XlaOp:
    return self._emit("create_token", [])


def after_all(self: XlaBuilder, tokens: Sequence[XlaOp]) -> XlaOp:
    return self._emit("after_all", [list(tokens)])


def infeed(self: XlaBuilder, shape: Shape, token: XlaOp | None = None) -> XlaOp:
    """The next value put on the executable's infeed queue (`exe.infeed.put(value)`)."""
    return self._emit("infeed", [_token(token)], {"shape": _shape("infeed", shape), "config": ""})


def outfeed(self: XlaBuilder, operand: XlaOp, shape_with_layout: Shape, outfeed_config: str = "",
            token: XlaOp | None = None) -> XlaOp:
    """Push `operand` to the executable's outfeed queue (`exe.outfeed.get()`); a token."""
    return self._emit("outfeed", [operand, _token(token)], {
        "shape_with_layout": _shape("outfeed", shape_with_layout),
        "outfeed_config": str(outfeed_config)})


def send(self: XlaBuilder, operand: XlaOp, channel: int | str, token: XlaOp | None = None) -> XlaOp:
    """Send `operand` on `channel` to a `recv` of any computation in this process; a token."""
    return self._emit("send", [operand, _token(token)], {"channel": _channel("send", channel)})


def recv(self: XlaBuilder, shape: Shape, channel: int | str, token: XlaOp | None = None) -> XlaOp:
    """The next value sent on `channel` (waits for it, up to `xm.RECV_TIMEOUT` seconds)."""
    return self._emit("recv", [_token(token)], {"shape": _shape("recv", shape),
                                                "channel": _channel("recv", channel)})


METHODS: dict[str, Callable[..., Any]] = {
    "create_token": create_token, "after_all": after_all, "infeed": infeed, "outfeed": outfeed,
    "send": send, "recv": recv,
}
