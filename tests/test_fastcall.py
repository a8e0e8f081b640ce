"""The C call path (runtime/fastcall.py, fastcall_source.py): for every dtype, 0-d and small arrays, numpy and
Python scalars, it returns bit for bit what the ctypes path returns; whatever it does not
take (strided views, wrong dtypes or shapes, subclasses, inexact Python scalars) goes to
the ctypes path, so results and errors are the ctypes path's. Without a compiler, or with
XLAMLIR_FASTCALL=off, everything still runs through ctypes."""

from __future__ import annotations

import gc
import os
import shutil
import struct
import sysconfig
import threading
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from targets_support import TARGETS, compile_for

import xlamlir as xm
from xlamlir.runtime import fastcall

P = xm.PrimitiveType
S = xm.Shape.parse
ALL_TYPES = (P.PRED, P.S2, P.S4, P.S8, P.S16, P.S32, P.S64, P.U2, P.U4, P.U8, P.U16, P.U32,
             P.U64, P.F16, P.BF16, P.F32, P.F64, P.C64, P.C128, P.F8E5M2, P.F8E4M3FN,
             P.F8E4M3B11FNUZ, P.F8E5M2FNUZ, P.F8E4M3FNUZ, P.F8E4M3, P.F8E3M4, P.F4E2M1FN,
             P.F8E8M0FNU)

# Only a machine without a C compiler or Python's headers skips: where they are, a C path
# that does not build fails these tests.
pytestmark = pytest.mark.skipif(
    shutil.which(fastcall._compiler()[0]) is None
    or not os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")),
    reason="no C compiler or no Python headers: the ctypes path only")


def test_the_c_path_builds() -> None:
    assert fastcall.module() is not None, fastcall.unavailable_reason()


def compile_fast(computation: xm.XlaComputation) -> xm.Executable:
    exe = xm.compile(computation)
    assert exe._use_fastcall()
    return exe


def fast(exe: xm.Executable, *args: Any) -> Any:
    """The C path's result; fails if it handed the call to ctypes."""
    result = exe._fast_run(args)
    assert result is not NotImplemented, "the C path deferred"
    return result


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """What a call did, comparable across paths: the result's bytes or the error."""
    try:
        result = call()
    except xm.XlaError as e:
        return ("error", type(e).__name__, str(e))
    results = result if isinstance(result, tuple) else (result,)
    return ("ok", tuple((type(r), r.dtype, r.shape, r.strides, r.tobytes()) for r in results))


def bit_patterns(t: P, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random valid values of `t`: any bytes for the wide types, canonical ones (high bits
    zero) for the narrow, 0/1 for pred."""
    dtype = xm.dtype_of(t)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if t == P.PRED:
        return rng.integers(0, 2, shape).astype(bool)
    if t.bit_width < 8:
        return rng.integers(0, 1 << t.bit_width, n, dtype=np.uint8).view(dtype).reshape(shape)
    raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_every_dtype_bit_for_bit_as_the_ctypes_path(t: P) -> None:
    b = xm.XlaBuilder("every_dtype")
    x = b.parameter(0, xm.Shape.array(t, (3, 5)))
    s = b.parameter(1, xm.Shape.array(t, ()))
    exe = compile_fast(b.build(b.tuple([b.rev(x, [0, 1]), b.broadcast(s, [2]), x])))
    values = bit_patterns(t, (3, 5), seed=int(t.bit_width))
    scalar = values[1, 2]  # a numpy scalar of the type (np.generic)
    assert type(scalar) is xm.dtype_of(t).type
    for args in [(values, scalar), (values, np.asarray(scalar)), (values[::-1].copy(), values[2, 4])]:
        got = fast(exe, *args)
        assert outcome(lambda: got) == outcome(lambda: exe._call_ctypes(args))
        assert got[0].tobytes() == args[0][::-1, ::-1].tobytes()
        assert got[1].tobytes() == np.asarray(args[1]).tobytes() * 2


def test_single_array_result_and_0d() -> None:
    b = xm.XlaBuilder("single")
    b.add(b.parameter(0, S("f32[]")), b.parameter(1, S("f32[]")))
    exe = compile_fast(b.build())
    for args in [(np.float32(1.5), np.float32(2.25)), (np.array(np.float32(-0.0)), np.float32(-0.0)),
                 (np.float32(np.inf), np.float32(-np.inf)), (np.float32(np.nan), 1.0)]:
        got = fast(exe, *args)
        assert type(got) is np.ndarray and got.shape == () and got.dtype == np.float32
        assert outcome(lambda: got) == outcome(lambda: exe._call_ctypes(args))
        with np.errstate(invalid="ignore"):
            expected = np.add(*[np.float32(a) for a in args])
        assert got.tobytes() == np.asarray(expected).tobytes()


def test_mixed_dtypes_many_parameters_and_no_parameter() -> None:
    # Descriptors of several ranks and element sizes side by side in one call.
    shapes = ["bf16[2,3]", "f16[]", "c64[4]", "pred[2]", "f8e4m3fn[3]", "s4[5]", "u64[]",
              "c128[1,2,1]", "s8[0,3]"]
    b = xm.XlaBuilder("mixed")
    params = [b.parameter(i, S(text)) for i, text in enumerate(shapes)]
    exe = compile_fast(b.build(b.tuple([b.rev(p, list(range(p.shape.rank))) for p in params])))
    args = [bit_patterns(S(text).element_type, S(text).dimensions, i) for i, text in enumerate(shapes)]
    got = fast(exe, *args)
    assert outcome(lambda: got) == outcome(lambda: exe._call_ctypes(tuple(args)))
    for a, r in zip(args, got):
        assert r.shape == a.shape and r.tobytes() == np.flip(a).tobytes()

    b = xm.XlaBuilder("constant")
    b.constant(np.arange(3, dtype=np.int32))
    exe = compile_fast(b.build())
    assert fast(exe).tolist() == [0, 1, 2]


# A float64 signaling NaN (quiet bit clear): narrowing it raises numpy's invalid flag.
SIGNALING_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]
QUIET_NAN_PAYLOAD = struct.unpack("<d", struct.pack("<Q", 0xFFF8_0123_4567_89AB))[0]


def scalar_exe(text: str) -> xm.Executable:
    b = xm.XlaBuilder("scalar_" + text.split("[")[0])
    p = b.parameter(0, S(text))
    return compile_fast(b.build(b.tuple([p, b.broadcast(p, [2])])))


@pytest.mark.parametrize("text, values", [
    ("f32[]", [0.0, -0.0, 1.5, float("nan"), float("inf"), -float("inf"), 1e-50, -1e-45, 1e-40,
               3.4028234663852886e38, 3.5e38, 1e39, -1e300, 7, -3, 2**24 + 1, 2**53 + 1, 2**60 + 1,
               2**127 + 1, 2**128, True, 2j, np.float64(1.0), SIGNALING_NAN, -SIGNALING_NAN,
               QUIET_NAN_PAYLOAD,
               1.1754943508222875e-38, 1.1754942e-38, 2.350988701644575e-38, 1.401298464324817e-45,
               7e-46, 3.4028235677973366e38, 3.4028235677973362e38]),
    ("f64[]", [0.0, -0.0, 1e-320, float("nan"), 1e308, 5, 2**53 - 1, -2**53, 2**53 + 1, 2**64 + 1,
               2**1100, True, 1 + 0j]),
    ("s8[]", [0, 127, 128, -128, -129, 3.0, 3.5, True, 2**70, np.int64(3), np.int8(-3)]),
    ("u8[]", [0, 255, 256, -1, True]),
    ("s32[]", [2**31 - 1, 2**31, -2**31, -2**31 - 1, False, 1.0]),
    ("s64[]", [2**63 - 1, 2**63, -2**63, -2**63 - 1]),
    ("u64[]", [0, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1]),
    ("pred[]", [True, False, 0, 1, 2, 1.0, np.bool_(True)]),
    ("c64[]", [1 + 2j, 1.5, 1e39 + 0j]),
    ("c128[]", [1 + 2j, complex("nan+infj"), 1.5, 3]),
    ("bf16[]", [1.0, 3, ml_dtypes.bfloat16(2.5)]),
    ("f16[]", [1.0, 70000.0, np.float16(-0.0)]),
    ("f32[2]", [1.0, np.float32(1.0)]),
])
def test_python_and_numpy_scalars_as_the_ctypes_path(text: str, values: list[Any]) -> None:
    exe = scalar_exe(text)
    for value in values:
        ours, theirs = outcome(lambda: exe(value)), outcome(lambda: exe._call_ctypes((value,)))
        assert ours == theirs, (text, value)


def test_exact_python_scalars_take_the_c_path() -> None:
    for text, value in [("f32[]", 1.5), ("f32[]", float("nan")), ("f32[]", QUIET_NAN_PAYLOAD),
                        ("f64[]", -0.0), ("s8[]", -128),
                        ("f32[]", 2**24 + 1), ("f64[]", -2**53), ("f32[]", -7),
                        ("u64[]", 2**63 - 1), ("pred[]", True), ("c128[]", 1 - 2j)]:
        exe = scalar_exe(text)
        assert outcome(lambda: fast(exe, value)) == outcome(lambda: exe._call_ctypes((value,)))


def test_what_the_c_path_leaves_to_ctypes_gives_the_same_results_and_errors() -> None:
    b = xm.XlaBuilder("leave")
    b.mul(b.parameter(0, S("f32[3,4]")), b.parameter(1, S("f32[]")))
    exe = compile_fast(b.build())
    x = np.arange(24, dtype=np.float32).reshape(6, 4)

    class Sub(np.ndarray):
        pass

    cases = [
        (x[::2], 2.0),  # strided view: the dynamic-stride variant
        (np.asfortranarray(x[:3]), 2.0),  # another layout
        (x[:3].astype(">f4"), 2.0),  # byte-swapped: a wrong dtype
        (x[:3].astype(np.float64), 2.0),
        (x[:2], 2.0),  # wrong shape
        (x[:3].tolist(), 2.0),
        ("x", 2.0),
        (x[:3].view(Sub), np.float32(2)),
        (x[:3], np.float64(2)),
        (x[:3], np.array([2.0], np.float32)),
        (x[:3], 1e39),
    ]
    for args in cases:
        assert exe._fast_run(args) is NotImplemented, args
        ours, theirs = outcome(lambda: exe(*args)), outcome(lambda: exe._call_ctypes(args))
        assert ours == theirs, args
    assert exe._fast_run((x[:3],)) is NotImplemented
    assert outcome(lambda: exe(x[:3])) == outcome(lambda: exe._call_ctypes((x[:3],)))
    assert outcome(lambda: exe(x[:3])) [0] == "error"
    with pytest.raises(xm.ArgumentError, match="expected dtype float32"):
        exe(x[:3].astype(np.float64), 2.0)
    with pytest.raises(xm.ArgumentError, match="expected shape"):
        exe(x[:2], 2.0)
    np.testing.assert_array_equal(exe(x[::2], 3.0), x[::2] * 3)


def test_layouts_parameters_in_place_results_left_to_ctypes() -> None:
    # A parameter with a column-major layout reads a Fortran array in place on the C path;
    # a result in a non-default layout keeps the executable on the ctypes path.
    b = xm.XlaBuilder("layout_in")
    b.transpose(b.parameter(0, S("f32[2,3]{0,1}")), [1, 0])
    exe = compile_fast(b.build())
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(fast(exe, x), x.T)
    assert exe._fast_run((np.ascontiguousarray(x),)) is NotImplemented

    b = xm.XlaBuilder("layout_out")
    b.parameter(0, S("f32[2,3]{0,1}"))
    exe = xm.compile(b.build())
    assert not exe._fast_pending and not exe._use_fastcall()
    np.testing.assert_array_equal(exe(x), x)


def test_second_call_switches_to_the_c_path() -> None:
    b = xm.XlaBuilder("warm")
    b.neg(b.parameter(0, S("s32[4]")))
    exe = xm.compile(b.build())
    x = np.arange(4, dtype=np.int32)
    for _ in range(fastcall.WARM_CALLS):
        np.testing.assert_array_equal(exe(x), -x)
    assert exe._fast_run is not None
    np.testing.assert_array_equal(exe(x), -x)


def test_many_calls_from_threads() -> None:
    b = xm.XlaBuilder("threads")
    x, k = b.parameter(0, S("f64[7]")), b.parameter(1, S("s64[]"))
    b.tuple([b.mul(x, b.convert_element_type(k, xm.F64)), k])
    exe = compile_fast(b.build())
    errors: list[str] = []
    barrier = threading.Barrier(8)

    def work(t: int) -> None:
        try:
            barrier.wait()
            for j in range(300):
                v = np.arange(7, dtype=np.float64) + t
                k = t * 1000 + j
                scaled, back = exe(v, k)
                assert np.array_equal(scaled, v * k) and back == k, (t, j)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors and not any(th.is_alive() for th in threads)


def test_result_outlives_the_executable() -> None:
    b = xm.XlaBuilder("outlive")
    b.add(b.parameter(0, S("f32[1000]")), b.constant(np.float32(1)))
    exe = compile_fast(b.build())
    x = np.arange(1000, dtype=np.float32)
    result = fast(exe, x)
    del exe
    gc.collect()
    assert result.flags.owndata and result.base is None
    np.testing.assert_array_equal(result, x + 1)


def test_custom_calls_stay_on_the_ctypes_path() -> None:
    b = xm.XlaBuilder("custom")
    p = b.parameter(0, S("f32[2]"))
    b.custom_call("xlamlir_test_fastcall_double", [p], S("f32[2]"))
    xm.register_custom_call("xlamlir_test_fastcall_double", lambda x, opaque=None: x * 2)
    exe = xm.compile(b.build())
    assert not exe._fast_pending and not exe._use_fastcall()
    np.testing.assert_array_equal(exe(np.float32([1, 2])), [2, 4])


def test_off_by_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fastcall.ENV, "off")
    assert fastcall.module() is None
    b = xm.XlaBuilder("env_off")
    b.neg(b.parameter(0, S("f32[2]")))
    exe = xm.compile(b.build())
    for _ in range(3):
        np.testing.assert_array_equal(exe(np.float32([1, -2])), [-1, 2])
    assert exe._fast_run is None


def test_no_compiler_keeps_the_ctypes_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastcall, "_state", {})
    monkeypatch.setenv("CC", "/nonexistent/xlamlir-cc")
    assert fastcall.module() is None
    assert "xlamlir-cc" in fastcall.unavailable_reason()
    b = xm.XlaBuilder("no_cc")
    b.neg(b.parameter(0, S("f32[2]")))
    exe = xm.compile(b.build())
    for _ in range(3):
        np.testing.assert_array_equal(exe(np.float32([1, -2])), [-1, 2])
    assert exe._fast_run is None


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_cpu(target: str) -> None:
    # The C path only calls the entry point; the code for each CPU variant runs the same.
    b = xm.XlaBuilder("targets")
    b.mul(b.parameter(0, S("f32[37]")), b.parameter(1, S("f32[]")))
    exe = compile_for(b.build(), target)
    assert exe._use_fastcall()
    x = np.linspace(-3, 3, 37, dtype=np.float32)
    x[:3] = [np.nan, -0.0, np.inf]
    for k in (np.float32(1.5), 2.5, -1):
        assert outcome(lambda: fast(exe, x, k)) == outcome(lambda: exe._call_ctypes((x, k)))
        with np.errstate(invalid="ignore"):
            assert fast(exe, x, k).tobytes() == (x * np.float32(k)).tobytes()


def test_an_executable_loaded_from_the_disk_cache(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Any) -> None:
    # The C path calls the entry of the cached shared library as it calls the JIT's.
    from xlamlir.runtime import disk_cache
    from xlamlir.runtime.cached_library import linker
    from xlamlir.runtime.compiler import clear_cache

    if linker() is None:
        pytest.skip("no linker: no disk cache")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    b = xm.XlaBuilder("from_disk")
    b.tuple([b.tanh(b.parameter(0, S("f32[5]"))), b.parameter(1, S("s32[]"))])
    computation = b.build()
    clear_cache()
    xm.compile(computation)
    disk_cache.flush()
    clear_cache()
    try:
        exe = xm.compile(computation)
        assert exe.compile_stats["disk_cache"] == "hit"
        assert exe._use_fastcall()
        x = np.linspace(-2, 2, 5, dtype=np.float32)
        assert outcome(lambda: fast(exe, x, 7)) == outcome(lambda: exe._call_ctypes((x, 7)))
    finally:
        clear_cache()


def test_clear_removes_the_built_module_a_loaded_one_keeps_working(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from xlamlir.runtime import disk_cache
    from xlamlir.runtime.compiler import load_async_runtime

    load_async_runtime()  # the process's thread pool built elsewhere: the folder holds one build
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(fastcall, "_state", {})  # built again, into tmp_path/fastcall
    b = xm.XlaBuilder("fast_after_clear")
    b.tanh(b.parameter(0, S("f32[7]")))
    exe = compile_fast(b.build())
    folder = tmp_path / "fastcall"
    assert [p.name.startswith("_fastcall-") for p in folder.iterdir()] == [True]
    # Another process's build under way: its temporary file keeps the folder.
    building = folder / ".tmp-build.so"
    building.write_bytes(b"")
    disk_cache.clear()
    assert [p.name for p in folder.iterdir()] == [building.name]
    os.utime(building, (0, 0))  # left by a process that died
    disk_cache.clear()
    assert not folder.exists()
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    assert fast(exe, x).tobytes() == np.asarray(exe._call_ctypes((x,))).tobytes()
    assert fast(compile_fast(b.build()), x).tobytes() == fast(exe, x).tobytes()
