"""IoMethods: the XlaBuilder methods for tokens and I/O. Imports `dialect`, `builder.args` and
`builder.recorder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..dialect.errors import ShapeError
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _token(token: XlaOp | None) -> list[XlaOp]:
    return [] if token is None else [token]


def _shape(op: str, shape: Any) -> str:
    if not isinstance(shape, Shape):
        raise ShapeError(op, [], f"shape must be an xm.Shape, got {type(shape).__name__}")
    return str(args.static_shape(op, shape, hint="transfer the padded array and its size (s32), "
                                 "then set_dimension_size"))


def _channel(op: str, channel: Any) -> str:
    if isinstance(channel, bool) or not isinstance(channel, (int, str)):
        raise ShapeError(op, [], f"channel must be an int or a str, got {channel!r}")
    return f"{type(channel).__name__}:{channel}"


class IoMethods(Recorder):
    """Tokens, infeed/outfeed and send/recv."""

    def create_token(self) -> XlaOp:
        return self.emit("create_token", [])

    def after_all(self, tokens: Sequence[XlaOp]) -> XlaOp:
        return self.emit("after_all", [list(tokens)])

    def infeed(self, shape: Shape, token: XlaOp | None = None) -> XlaOp:
        """The next value put on the executable's infeed queue (`exe.infeed.put(value)`)."""
        return self.emit("infeed", [_token(token)], {"shape": _shape("infeed", shape), "config": ""})

    def outfeed(self, operand: XlaOp, shape_with_layout: Shape, outfeed_config: str = "",
                token: XlaOp | None = None) -> XlaOp:
        """Push `operand` to the executable's outfeed queue (`exe.outfeed.get()`); a token."""
        return self.emit("outfeed", [operand, _token(token)], {
            "shape_with_layout": _shape("outfeed", shape_with_layout),
            "outfeed_config": str(outfeed_config)})

    def send(self, operand: XlaOp, channel: int | str, token: XlaOp | None = None) -> XlaOp:
        """Send `operand` on `channel` to a `recv` of any computation in this process; a token."""
        return self.emit("send", [operand, _token(token)], {"channel": _channel("send", channel)})

    def recv(self, shape: Shape, channel: int | str, token: XlaOp | None = None) -> XlaOp:
        """The next value sent on `channel` (waits for it, up to `xm.RECV_TIMEOUT` seconds)."""
        return self.emit("recv", [_token(token)], {"shape": _shape("recv", shape),
                                                    "channel": _channel("recv", channel)})
