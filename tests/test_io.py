"""Tokens, infeed/outfeed queues and send/recv channels."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime import io

S = xm.Shape.array


def test_infeed_outfeed_round_trip_in_order() -> None:
    b = xm.XlaBuilder("feeds")
    token = b.create_token()
    first = b.infeed(S(xm.F32, (3,)), token)
    pair_shape = xm.Shape.tuple([S(xm.S32, ()), S(xm.F32, (2,))])
    pair = b.infeed(pair_shape)
    t1 = b.outfeed(first * 2.0, S(xm.F32, (3,)), "cfg", token)
    t2 = b.outfeed(pair, pair_shape, "", t1)
    b.tuple([first + 1.0, b.after_all([t1, t2])])
    exe = xm.compile(b.build())
    for step in range(3):
        exe.infeed.put(np.arange(3, dtype=np.float32) + step)
        exe.infeed.put((np.int32(step), np.full(2, step, np.float32)))
        result, token_value = exe()
        np.testing.assert_array_equal(result, np.arange(3) + step + 1)
        assert token_value is None
    for step in range(3):
        np.testing.assert_array_equal(exe.outfeed.get(timeout=1), (np.arange(3) + step) * 2)
        got_int, got_array = exe.outfeed.get(timeout=1)
        assert got_int == step and got_array.tolist() == [step, step]
    assert exe.outfeed.empty()


def test_send_recv_between_two_threads() -> None:
    sender = xm.XlaBuilder("sender")
    x = sender.parameter(0, S(xm.F32, (2,)))
    token = sender.send(x * 3.0, 7)
    sender.send(x + 1.0, 7, token)
    sender.add(x, x)
    receiver = xm.XlaBuilder("receiver")
    first = receiver.recv(S(xm.F32, (2,)), 7)
    second = receiver.recv(S(xm.F32, (2,)), 7)
    receiver.sub(second, first)
    send_exe, recv_exe = xm.compile(sender.build()), xm.compile(receiver.build())
    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("r", recv_exe()))
    thread.start()
    np.testing.assert_array_equal(send_exe(np.array([1, 2], np.float32)), [2, 4])
    thread.join(timeout=30)
    np.testing.assert_array_equal(got["r"], np.array([2, 3]) - np.array([3, 6]))


def test_reads_time_out_instead_of_hanging(monkeypatch) -> None:
    monkeypatch.setattr(io, "IO_TIMEOUT", 0.2)
    b = xm.XlaBuilder("starved")
    b.recv(S(xm.S32, ()), "nobody-sends-here")
    with pytest.raises(xm.XlaError, match="nobody-sends-here"):
        xm.compile(b.build())()
    b = xm.XlaBuilder("starved_infeed")
    b.infeed(S(xm.S32, ()))
    exe = xm.compile(b.build())
    with pytest.raises(xm.XlaError, match="infeed"):
        exe.infeed.take(timeout=0.2)
    exe.infeed.put(np.float32(1))  # the wrong dtype
    with pytest.raises(xm.XlaError, match="int32"):
        exe()


def test_infeed_reads_io_timeout_at_call_time(monkeypatch) -> None:
    b = xm.XlaBuilder("starved_infeed_call")
    b.infeed(S(xm.S32, ()))
    exe = xm.compile(b.build())
    # Set after the module was imported and the executable compiled: still obeyed.
    monkeypatch.setattr(io, "IO_TIMEOUT", 0.2)
    started = time.monotonic()
    with pytest.raises(xm.XlaError, match=r"infeed.*within 0\.2 s"):
        exe()
    assert time.monotonic() - started < 10  # not the 60 s default
    started = time.monotonic()
    with pytest.raises(xm.XlaError, match=r"within 0\.2 s"):
        exe.infeed.take()
    assert time.monotonic() - started < 10


def test_token_rules() -> None:
    b = xm.XlaBuilder("tokens")
    with pytest.raises(xm.ShapeError, match="at least one"):
        b.after_all([])
    x = b.parameter(0, S(xm.F32, (2,)))
    with pytest.raises(xm.ShapeError, match="token"):
        b.after_all([x])
    with pytest.raises(xm.ShapeError, match="does not match"):
        b.outfeed(x, S(xm.F32, (3,)))
    with pytest.raises(xm.ShapeError, match="channel"):
        b.send(x, 1.5)
    b2 = xm.XlaBuilder("token_param")
    b2.parameter(0, xm.Shape.token())
    with pytest.raises(xm.CompileError, match="token"):
        xm.compile(b2.build())


def test_io_hlo_text() -> None:
    b = xm.XlaBuilder("text")
    t = b.create_token()
    data = b.infeed(S(xm.F32, (2,)), t)
    b.outfeed(data, S(xm.F32, (2,)), "config", t)
    text = b.build(data).as_mlir_text()
    for fragment in ('"xhlo.create_token"', '"xhlo.infeed"', '"xhlo.outfeed"', "!xhlo.token",
                     'outfeed_config = "config"'):
        assert fragment in text
