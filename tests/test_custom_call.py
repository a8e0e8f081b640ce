"""custom_call into Python functions and into C functions with XLA's CPU ABI."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import xlamlir as xm

S = xm.Shape.array


def test_python_target_with_tuple_result_and_opaque() -> None:
    seen = {}

    def target(a, b, opaque):
        seen["opaque"] = opaque
        seen["readonly"] = not a.flags.writeable
        return a * 2 + b, np.sum(a, dtype=np.float32)

    xm.register_custom_call("test.twice_plus", target)
    b = xm.XlaBuilder("cc")
    x = b.parameter(0, S(xm.F32, (3,)))
    y = b.parameter(1, S(xm.F32, (3,)))
    r = b.custom_call("test.twice_plus", [x, b.neg(y)],
                      xm.Shape.tuple([S(xm.F32, (3,)), S(xm.F32, ())]), opaque="cfg=1")
    b.tuple([b.add(b.get_tuple_element(r, 0), x), b.get_tuple_element(r, 1)])
    exe = xm.compile(b.build())
    xv, yv = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    first, total = exe(xv, yv)
    np.testing.assert_array_equal(first, 3 * xv - yv)
    assert total == 3.0
    assert seen == {"opaque": "cfg=1", "readonly": True}


@pytest.mark.parametrize("later", ["custom_call", "while_and_custom_call"])
def test_a_result_read_by_a_later_call_after_an_in_place_loop(later: str) -> None:
    """A callback's result given to a while loop (which updates its state in place) and,
    after the loop, to another callback: the later call reads the result as it was.
    Canonicalization made that read one of the result's buffer, unseen by bufferization,
    and the loop doubled the buffer under it (differential fuzzer seed 971352;
    lowering/passes/tensor_reads.py)."""
    xm.register_custom_call("test.pair", lambda a, c: (a, a + c))
    b = xm.XlaBuilder("cc_loop")
    x = b.parameter(0, S(xm.F64, (1, 3)))
    y = b.parameter(1, S(xm.F64, (1, 3)))
    pair = xm.Shape.tuple([S(xm.F64, (1, 3))] * 2)
    v = b.get_tuple_element(b.custom_call("test.pair", [x, y], pair), 1)

    def cond(t: xm.XlaOp) -> xm.XlaOp:
        return t.builder.lt(t.builder.get_tuple_element(t, 0), t.builder.constant(np.int32(2)))

    def body(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        state = bb.get_tuple_element(t, 1)
        return bb.tuple([bb.add(bb.get_tuple_element(t, 0), bb.constant(np.int32(1))),
                         bb.add(state, state)])

    loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), v]))
    after = b.get_tuple_element(b.custom_call("test.pair", [v, v], pair), 1)
    outs = [b.get_tuple_element(loop, 0), after]
    if later == "while_and_custom_call":
        outs.append(b.get_tuple_element(loop, 1))
    got = xm.compile(b.build(b.tuple(outs)))(np.float64([[1, 2, 3]]), np.float64([[1, 1, 1]]))
    np.testing.assert_array_equal(got[1], [[4, 6, 8]])  # 2 (x + y), not 2 * 4 (x + y)
    if later == "while_and_custom_call":
        np.testing.assert_array_equal(got[2], [[8, 12, 16]])


def test_python_target_sees_every_dtype() -> None:
    def target(p, h, u):
        return ~p, (h.astype(np.float32) * 2).astype(ml_dtypes.bfloat16), u + np.uint64(1)

    xm.register_custom_call("test.dtypes", target)
    b = xm.XlaBuilder("dtypes")
    shapes = [S(xm.PRED, (4,)), S(xm.BF16, (4,)), S(xm.U64, (2, 2))]
    params = [b.parameter(i, s) for i, s in enumerate(shapes)]
    b.custom_call("test.dtypes", params, xm.Shape.tuple(shapes))
    p = np.array([True, False, True, False])
    h = np.array([1.5, -2, 0, 3], ml_dtypes.bfloat16)
    u = np.array([[0, 2**64 - 1], [5, 6]], np.uint64)
    rp, rh, ru = xm.compile(b.build())(p, h, u)
    np.testing.assert_array_equal(rp, ~p)
    np.testing.assert_array_equal(rh.astype(np.float32), h.astype(np.float32) * 2)
    np.testing.assert_array_equal(ru, u + np.uint64(1))


def test_errors_in_the_target_are_raised_after_the_call() -> None:
    xm.register_custom_call("test.fails", lambda a: 1 / 0)
    b = xm.XlaBuilder("fails")
    b.custom_call("test.fails", [b.parameter(0, S(xm.F32, (2,)))], S(xm.F32, (2,)))
    exe = xm.compile(b.build())
    with pytest.raises(xm.CustomCallError) as info:
        exe(np.zeros(2, np.float32))
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    xm.register_custom_call("test.fails", lambda a: np.zeros(3, np.float32))
    with pytest.raises(xm.CustomCallError, match="shape"):
        exe(np.zeros(2, np.float32))
    xm.register_custom_call("test.fails", lambda a: a + 1)
    np.testing.assert_array_equal(exe(np.zeros(2, np.float32)), [1, 1])


def test_unregistered_target_and_bad_registration() -> None:
    b = xm.XlaBuilder("missing")
    b.custom_call("test.never_registered", [b.parameter(0, S(xm.F32, ()))], S(xm.F32, ()))
    exe = xm.compile(b.build())
    with pytest.raises(xm.CustomCallError, match="never_registered"):
        exe(np.float32(1))
    with pytest.raises(xm.ArgumentError):
        xm.register_custom_call("", lambda: None)


def test_misspelled_target_is_named_with_a_suggestion() -> None:
    xm.register_custom_call("test.scale_by_two", lambda a: a * 2)
    b = xm.XlaBuilder("typo")
    b.custom_call("test.scale_by_tow", [b.parameter(0, S(xm.F32, ()))], S(xm.F32, ()))
    with pytest.warns(UserWarning, match=r"did you mean 'test.scale_by_two'") as caught:
        exe = xm.compile(b.build())
    assert caught[0].filename == __file__  # the user's xm.compile line
    with pytest.raises(xm.CustomCallError, match=r"'test.scale_by_tow'.*did you mean 'test.scale_by_two'"):
        exe(np.float32(1))
    with pytest.raises(xm.ArgumentError):
        xm.register_custom_call("x", "not callable")
    with pytest.raises(xm.ShapeError):
        xm.XlaBuilder("b").custom_call("x", [], "f32[2]")


def test_side_effecting_call_with_unused_result_still_runs() -> None:
    calls = []
    xm.register_custom_call("test.log", lambda a: (calls.append(a.copy()), a)[1])
    b = xm.XlaBuilder("log")
    x = b.parameter(0, S(xm.S32, (2,)))
    b.custom_call("test.log", [x], S(xm.S32, (2,)), has_side_effect=True)
    b.add(x, x)
    out = xm.compile(b.build())(np.array([1, 2], np.int32))
    np.testing.assert_array_equal(out, [2, 4])
    assert len(calls) == 1 and calls[0].tolist() == [1, 2]


C_SOURCE = r"""
#include <stdint.h>
/* XLA's original CPU custom-call ABI: out, then an array of input pointers. */
void add_scaled(void *out, const void **in) {
  const float *x = in[0], *y = in[1];
  float *r = out;
  for (int i = 0; i < 4; ++i) r[i] = x[i] + 10.0f * y[i];
}
void split(void *out, const void **in) {
  void **outs = out;
  const int32_t *x = in[0];
  int32_t *lo = outs[0], *hi = outs[1];
  for (int i = 0; i < 3; ++i) { lo[i] = x[i] & 0xffff; hi[i] = x[i] >> 16; }
}
"""


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler on this machine")
def test_c_function_targets(tmp_path) -> None:
    source = tmp_path / "targets.c"
    source.write_text(C_SOURCE)
    library = tmp_path / "libtargets.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(library), str(source)], check=True)
    lib = ctypes.CDLL(str(library))
    xm.register_custom_call("test.c_add_scaled", lib.add_scaled)
    xm.register_custom_call("test.c_split", ctypes.cast(lib.split, ctypes.c_void_p).value)
    b = xm.XlaBuilder("c_calls")
    x = b.parameter(0, S(xm.F32, (4,)))
    y = b.parameter(1, S(xm.F32, (4,)))
    z = b.parameter(2, S(xm.S32, (3,)))
    added = b.custom_call("test.c_add_scaled", [x, b.mul(y, y)], S(xm.F32, (4,)))
    parts = b.custom_call("test.c_split", [z], xm.Shape.tuple([S(xm.S32, (3,)), S(xm.S32, (3,))]))
    b.tuple([added, b.get_tuple_element(parts, 0), b.get_tuple_element(parts, 1)])
    xv = np.arange(4, dtype=np.float32)
    yv = np.array([1, 2, 3, 4], np.float32)
    zv = np.array([0x10002, 0x7fff0001, -1], np.int32)
    added, lo, hi = xm.compile(b.build())(xv, yv, zv)
    np.testing.assert_array_equal(added, xv + 10 * yv * yv)
    np.testing.assert_array_equal(lo, zv & 0xFFFF)
    np.testing.assert_array_equal(hi, zv >> 16)


def test_custom_call_hlo_text() -> None:
    b = xm.XlaBuilder("text")
    b.custom_call("my.target", [b.parameter(0, S(xm.F32, (2,)))], S(xm.F32, (2, 1)), opaque="o")
    text = b.build().as_mlir_text()
    assert '"xhlo.custom_call"' in text
    assert 'call_target_name = "my.target"' in text and 'backend_config = "o"' in text
    assert 'result_shape = "f32[2,1]"' in text


def test_an_unregistered_target_names_the_op_s_line() -> None:
    b = xm.XlaBuilder("unregistered_target")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2,)))
    b.custom_call("session4_nobody_registered_this", [x], xm.Shape.array(xm.F32, (2,)))
    line = sys._getframe().f_lineno - 1
    exe = xm.compile(b.build())
    with pytest.raises(xm.CustomCallError, match=rf"custom_call at .*test_custom_call\.py:{line}\b"):
        exe(np.float32([1, 2]))
