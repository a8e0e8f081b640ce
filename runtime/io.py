"""Host side of infeed/outfeed and of send/recv channels.

Each executable owns an infeed queue (`exe.infeed.put(value)`) and an outfeed
queue (`exe.outfeed.get(timeout=None)`); channels are shared by every
computation of the process, so a `send` in one running computation feeds a
`recv` in another (on another thread). A read that finds nothing waits up to
`IO_TIMEOUT` seconds, then fails the computation instead of hanging forever.
Imports `dialect`.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dialect.errors import XlaError
from ..dialect.shape import Shape

IO_TIMEOUT = 60.0


class IOError_(XlaError, RuntimeError):  # noqa: N801 - not the builtin IOError
    """An infeed/recv found no value in time, or a value of the wrong shape."""


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _rebuild(shape: Shape, leaves: list[np.ndarray]) -> Any:
    it = iter(leaves)

    def build(s: Shape) -> Any:
        return tuple(build(t) for t in s.tuple_shapes) if s.is_tuple() else next(it)

    return build(shape)


def _fill(outs: list[np.ndarray], value: Any, what: str) -> None:
    leaves = _leaves(value)
    if len(leaves) != len(outs):
        raise IOError_(f"{what}: expected {len(outs)} array(s), got {len(leaves)}")
    for out, leaf in zip(outs, leaves, strict=True):
        array = np.asarray(leaf)
        if array.shape != out.shape or array.dtype != out.dtype:
            raise IOError_(f"{what}: expected {out.dtype}{list(out.shape)}, got "
                           f"{array.dtype}{list(array.shape)}")
        out[...] = array


class Infeed:
    """Values for the executable's `infeed` ops, consumed in program order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()

    def put(self, value: Any) -> None:
        """Queue an array (or a tuple of arrays) for the next infeed."""
        self._queue.put(tuple(_leaves(value)) if isinstance(value, (tuple, list)) else value)

    def take(self, timeout: float | None = None) -> Any:
        """The next queued value; waits up to `timeout` seconds (None: `IO_TIMEOUT`, read now,
        so that setting `xlamlir.runtime.io.IO_TIMEOUT` takes effect on the next call)."""
        if timeout is None:
            timeout = IO_TIMEOUT
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise IOError_(f"infeed: nothing was put on exe.infeed within {timeout} s") from None


class Outfeed:
    """Values the executable's `outfeed` ops produced, in program order."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Any] = queue.Queue()

    def push(self, value: Any) -> None:
        self._queue.put(value)

    def get(self, timeout: float | None = None) -> Any:
        """The next outfed value (waits up to `timeout` seconds; None waits forever)."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            raise IOError_(f"outfeed: no value within {timeout} s") from None

    def empty(self) -> bool:
        return self._queue.empty()


_channels: dict[str, queue.Queue[Any]] = {}
_channels_lock = threading.Lock()


def channel(name: str) -> queue.Queue[Any]:
    with _channels_lock:
        return _channels.setdefault(name, queue.Queue())


def builtins(infeed: Infeed, outfeed: Outfeed) -> dict[str, Callable[..., None]]:
    """The runtime's own call targets: `fn(ins, outs, opaque)` for each I/O op."""

    def do_infeed(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        _fill(outs, infeed.take(), f"infeed of {opaque}")

    def do_outfeed(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        outfeed.push(_rebuild(Shape.parse(opaque), [a.copy() for a in ins]))

    def do_send(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        channel(opaque).put([a.copy() for a in ins])

    def do_recv(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        try:
            value = channel(opaque).get(timeout=IO_TIMEOUT)
        except queue.Empty:
            raise IOError_(f"recv on channel {opaque.split(':', 1)[1]!r}: nothing was sent within "
                           f"{IO_TIMEOUT} s") from None
        _fill(outs, value, f"recv on channel {opaque.split(':', 1)[1]!r}")

    return {"xlamlir.infeed": do_infeed, "xlamlir.outfeed": do_outfeed,
            "xlamlir.send": do_send, "xlamlir.recv": do_recv}
