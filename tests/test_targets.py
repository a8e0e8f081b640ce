"""target_cpu: the JIT really generates code for the CPU asked for, and every target gives
the same bits (f16/bf16 conversions in integer code: lowering/soft_float.py)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from targets_support import runs_here

import xlamlir as xm
from xlamlir.runtime import targets

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)


# x86-64-v2/v3 must run on every machine this project supports (AVX2); v4 needs AVX-512.
TARGETS = ["host", "x86-64-v2", "x86-64-v3",
           pytest.param("x86-64-v4", marks=pytest.mark.skipif(
               not runs_here("x86-64-v4"), reason="this CPU has no AVX-512: cannot run x86-64-v4 code"))]


def _special(dtype: np.dtype) -> np.ndarray:
    """NaN, +-inf, +-0, subnormals (smallest, largest, ties), extremes, random values."""
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    values = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, tiny, -tiny, 3 * tiny,
              float(info.smallest_normal) - tiny, float(info.smallest_normal), float(info.max),
              -float(info.max), float(info.max) / 2 + float(info.eps), 2.5 * tiny]
    rng = np.random.default_rng(7)
    random = rng.standard_normal(47) * rng.choice([1e-3, 1.0, 1e3], 47)
    out = np.array(values + list(random), dtype=np.float64).astype(dtype)
    # Every subnormal bit pattern of the type too: where flushing to zero would show.
    subnormals = np.arange(1, 1 << info.nmant, max(1, (1 << info.nmant) // 64), dtype=np.uint16)
    return np.concatenate([out, subnormals.view(dtype), (subnormals | 0x8000).view(dtype)])


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}")


def _unary(dtype: np.dtype, n: int, fn) -> xm.XlaComputation:
    b = xm.XlaBuilder("f")
    x = b.parameter(0, xm.Shape.array(dtype, (n,)))
    fn(b, x)
    return b.build()


def _programs(dtype: np.dtype, n: int) -> dict[str, xm.XlaComputation]:
    two = np.array(2, dtype)
    return {
        "x * 2": _unary(dtype, n, lambda b, x: x * b.constant(two)),
        "reduce_precision(x, 8, 7)": _unary(dtype, n, lambda b, x: b.reduce_precision(x, 8, 7)),
        "reduce_precision(x, 5, 10)": _unary(dtype, n, lambda b, x: b.reduce_precision(x, 5, 10)),
        "to f32 and back": _unary(dtype, n, lambda b, x: b.convert_element_type(
            b.convert_element_type(x, xm.F32) * b.constant(np.float32(0.75)), dtype)),
        "to f64": _unary(dtype, n, lambda b, x: b.convert_element_type(x, xm.F64)),
        "sum": _unary(dtype, n, lambda b, x: b.reduce(x * x, b.constant(np.array(0, dtype)),
                                                      lambda acc, v: acc + v, [0])),
        "exp": _unary(dtype, n, lambda b, x: b.exp(x)),
    }


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("target", TARGETS)
def test_small_floats_same_bits_on_every_target(dtype: np.dtype, target: str) -> None:
    x = _special(dtype)
    finite = x[np.isfinite(x.astype(np.float32))]
    for what, comp in _programs(dtype, x.size).items():
        arg = finite if what == "sum" else x
        if what == "sum":
            comp = _programs(dtype, finite.size)[what]
        host = xm.compile(comp)(arg)
        got = xm.compile(comp, target_cpu=target)(arg)
        assert got.dtype == host.dtype
        np.testing.assert_array_equal(_bits(got), _bits(host), err_msg=f"{what} on {target}")


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_small_float_subnormals_are_kept(dtype: np.dtype) -> None:
    """IEEE rounding with subnormals, not XLA:CPU's (or AVX512-BF16's) flush to zero."""
    x = _special(dtype)
    f32 = x.astype(np.float32)
    nan = np.isnan(f32)
    twice = xm.compile(_programs(dtype, x.size)["x * 2"])(x)
    with np.errstate(over="ignore"):
        want = (f32 * 2).astype(dtype)
    same = (_bits(twice) == _bits(want)) | nan
    assert same.all(), f"x * 2 differs at {x[~same][:5]}"
    # The type's own format: the identity, subnormals included.
    own = (8, 7) if dtype == BF16 else (5, 10)
    got = xm.compile(_unary(dtype, x.size, lambda b, v: b.reduce_precision(v, *own)))(x)
    same = (_bits(got) == _bits(x)) | nan
    assert same.all(), f"reduce_precision{own} differs at {x[~same][:5]}"


def test_nan_and_signed_zero_conversions() -> None:
    """NaN keeps its sign and becomes quiet; -0.0 stays -0.0; inf stays inf."""
    values = np.array([np.nan, -np.nan, -0.0, 0.0, np.inf, -np.inf], np.float32)
    for dtype, quiet in ((BF16, 0x0040), (F16, 0x0200)):
        comp = _unary(np.dtype(np.float32), values.size, lambda b, x, d=dtype: b.convert_element_type(x, d))
        for target in ("host", "x86-64-v3"):
            got = _bits(xm.compile(comp, target_cpu=target)(values))
            assert got[0] & 0x8000 == 0 and got[1] & 0x8000, target
            assert (got[:2] & quiet).all()
            np.testing.assert_array_equal(got[2:], _bits(values[2:].astype(dtype)))


@pytest.mark.parametrize("target", TARGETS)
def test_f32_programs_same_bits_on_every_target(target: str) -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((96, 160), dtype=np.float32)
    w = rng.standard_normal((160, 136), dtype=np.float32)
    b = xm.XlaBuilder("mlp")
    x = b.parameter(0, xm.Shape.array(xm.F32, a.shape))
    y = b.parameter(1, xm.Shape.array(xm.F32, w.shape))
    h = b.max(b.dot(x, y), b.constant(np.float32(0)))
    total = b.reduce(b.exp(h * b.constant(np.float32(0.01))) + b.tanh(h), b.constant(np.float32(0)),
                     lambda acc, v: acc + v, [1])
    comp = b.build([h, total])
    host = xm.compile(comp)(a, w)
    got = xm.compile(comp, target_cpu=target)(a, w)
    for g, h_ in zip(got, host):
        np.testing.assert_array_equal(_bits(g), _bits(h_), err_msg=target)
    np.testing.assert_allclose(got[0], np.maximum(a @ w, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", TARGETS)
def test_batched_dot_same_bits_on_every_target(target: str) -> None:
    # The batched schedule's register tiles differ per target (8 x 32 with AVX-512, 6 x 16
    # else); every element is still one fma chain over k in order, so the bits agree. The
    # second product is an attention-shaped [B,H,S,D] x [B,H,S,D] contracting D, N = 70 off
    # the panel widths; the third a matrix-vector product (its sums in vector lanes).
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 40, 144), dtype=np.float32)
    y = rng.standard_normal((3, 144, 72), dtype=np.float32)
    q = rng.standard_normal((2, 2, 48, 64), dtype=np.float32)
    k = rng.standard_normal((2, 2, 70, 64), dtype=np.float32)
    b = xm.XlaBuilder("bdot")
    px, py, pq, pk = (b.parameter(i, xm.Shape.array(xm.F32, a.shape)) for i, a in enumerate((x, y, q, k)))
    products = [b.dot_general(px, py, xm.DotDimensionNumbers((2,), (1,), (0,), (0,))),
                b.dot_general(pq, pk, xm.DotDimensionNumbers((3,), (3,), (0, 1), (0, 1))),
                b.dot_general(px, b.reshape(b.slice(py, (0, 0, 0), (1, 144, 1)), (144,)),
                              xm.DotDimensionNumbers((2,), (0,), (), ()))]
    comp = b.build(products)
    host = xm.compile(comp)(x, y, q, k)
    got = xm.compile(comp, target_cpu=target)(x, y, q, k)
    for g, h in zip(got, host):
        np.testing.assert_array_equal(_bits(g), _bits(h), err_msg=target)
    np.testing.assert_allclose(got[0], x.astype(np.float64) @ y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[1], np.einsum("bhsd,bhtd->bhst", q.astype(np.float64), k),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[2], x.astype(np.float64) @ y[0, :, 0], rtol=1e-4, atol=1e-4)


def _strided_conv_and_max_pool() -> xm.XlaComputation:
    """A 3x3/2 NCHW convolution (stride phases on the scheduled NHWC kernel, vector-tile
    transposes) and a padded 3x3/2 max-pool (vector window loops), in one program."""
    b = xm.XlaBuilder("conv_pool")
    x = b.parameter(0, xm.Shape.array(xm.F32, (2, 64, 17, 15)))
    k = b.parameter(1, xm.Shape.array(xm.F32, (48, 64, 3, 3)))
    y = b.parameter(2, xm.Shape.array(xm.F32, (2, 9, 11, 40)))
    conv = b.conv_general_dilated(x, k, (2, 2), [(1, 1), (1, 1)], dimension_numbers=("NCHW", "OIHW", "NCHW"))
    pool = b.reduce_window(y, b.constant(np.float32(-np.inf)), lambda a, v: a.builder.max(a, v),
                           [1, 3, 3, 1], [1, 2, 2, 1], padding=[(0, 0), (1, 1), (0, 1), (0, 0)])
    return b.build([conv, pool])


@pytest.mark.parametrize("target", TARGETS)
def test_strided_conv_and_max_pool_same_bits_on_every_target(target: str) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 64, 17, 15), dtype=np.float32)
    k = rng.standard_normal((48, 64, 3, 3), dtype=np.float32)
    y = rng.standard_normal((2, 9, 11, 40), dtype=np.float32)
    y.reshape(-1)[rng.choice(y.size, 60, replace=False)] = np.array(
        [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], np.float32).repeat(10)
    comp = _strided_conv_and_max_pool()
    host = xm.compile(comp)(x, k, y)
    got = xm.compile(comp, target_cpu=target)(x, k, y)
    for g, h in zip(got, host):
        np.testing.assert_array_equal(_bits(g), _bits(h), err_msg=target)
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_allclose(got[0], np.einsum("ncyxij,ocij->noyx", windows, k), rtol=1e-4, atol=1e-3)


def _objdump(path: Path) -> str:
    """The disassembly of an object file or library (skips the test without objdump)."""
    objdump = shutil.which("llvm-objdump") or shutil.which("objdump")
    if objdump is None:
        pytest.skip("no objdump to disassemble with")
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(path)], capture_output=True,
                          text=True, check=True).stdout


def _disassemble(exe: xm.Executable, tmp_path: Path) -> str:
    path = tmp_path / f"{exe.target_cpu}.o"
    exe.write_object(str(path))
    return _objdump(path)


def _matmul() -> xm.XlaComputation:
    b = xm.XlaBuilder("matmul")
    x = b.parameter(0, xm.Shape.array(xm.F32, (128, 128)))
    b.dot(x, x) + x
    return b.build()


def test_target_changes_the_machine_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ExecutionEngine compiles for the host; the functions' target attributes must win,
    also in the engine's host-compiled wrappers (no inlining into them)."""
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    xm.runtime.clear_cache()
    v3 = _disassemble(xm.compile(_matmul(), target_cpu="x86-64-v3"), tmp_path)
    assert "ymm" in v3 and "vfmadd" in v3
    assert "zmm" not in v3
    v2 = _disassemble(xm.compile(_matmul(), target_cpu="x86-64-v2"), tmp_path)
    assert "xmm" in v2 and not re.search(r"[yz]mm|vfmadd", v2)
    if runs_here("x86-64-v4"):
        assert "zmm" in _disassemble(xm.compile(_matmul(), target_cpu="x86-64-v4"), tmp_path)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler to link the export")
def test_x86_64_v4_machine_code_on_any_machine(tmp_path: Path) -> None:
    """x86-64-v4's own instructions, checked where they cannot run: an exported library is
    generated for its CPU without the JIT. The 8 x 32 register tiles in zmm registers."""
    library = tmp_path / "libmatmul.so"
    xm.compile(_matmul()).export(str(library), target_cpu="x86-64-v4")
    code = _objdump(library)
    assert re.search(r"vfmadd\w+\s+.*zmm", code), "no 512-bit fma in the x86-64-v4 export"


def test_write_object_needs_the_environment_variable(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("XLAMLIR_KEEP_OBJECT", raising=False)
    xm.runtime.clear_cache()
    with pytest.raises(xm.CompileError, match="XLAMLIR_KEEP_OBJECT"):
        xm.compile(_matmul(), target_cpu="x86-64-v3").write_object(str(tmp_path / "m.o"))


def test_cache_keys_on_the_target(monkeypatch) -> None:
    monkeypatch.delenv("XLAMLIR_TARGET_CPU", raising=False)
    comp = _matmul()
    v3 = xm.compile(comp, target_cpu="x86-64-v3")
    assert xm.compile(comp, target_cpu="x86-64-v3") is v3
    assert xm.compile(comp, target_cpu="x86-64-v2") is not v3
    assert xm.compile(comp).target_cpu == "host" and v3.target_cpu == "x86-64-v3"


def test_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_TARGET_CPU", "x86-64-v2")
    assert xm.compile(_matmul()).target_cpu == "x86-64-v2"
    assert xm.compile(_matmul(), target_cpu="host").target_cpu == "host"
    monkeypatch.setenv("XLAMLIR_TARGET_CPU", "no-such-cpu")
    with pytest.raises(xm.ArgumentError, match="no-such-cpu"):
        xm.compile(_matmul())


@pytest.mark.parametrize("bad", ["pentium-9", "cortex-a72", "", 64])
def test_bad_target_names(bad: object) -> None:
    with pytest.raises(xm.ArgumentError, match="x86-64-v3"):
        xm.compile(_matmul(), target_cpu=bad)
    with pytest.raises(xm.ArgumentError):
        xm.compile_mlir(_matmul().as_mlir_text(), target_cpu=bad)


def test_target_this_machine_cannot_run_is_refused() -> None:
    # Sapphire Rapids has AVX512-FP16 and AMX, which no AMD CPU (this one or others) has.
    missing = targets.missing_features("sapphirerapids")
    if not missing:
        pytest.skip("this machine runs sapphirerapids code")
    with pytest.raises(xm.ArgumentError, match="export"):
        xm.compile(_matmul(), target_cpu="sapphirerapids")


def _convert(src: np.dtype, dst: np.dtype, values: np.ndarray, target: str = "host") -> np.ndarray:
    b = xm.XlaBuilder("convert")
    b.convert_element_type(b.parameter(0, xm.Shape.array(src, values.shape)), dst)
    return xm.compile(b.build(), target_cpu=target)(values)


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_conversions_match_numpy(dtype: np.dtype) -> None:
    """The integer-code conversions (lowering/soft_float.py) against numpy / ml_dtypes:
    widening every bit pattern exactly (NaN payloads too), narrowing f32 and f64 (every
    f32 pattern around the subnormal and overflow thresholds, and random ones)."""
    every = np.arange(1 << 16, dtype=np.uint16).view(dtype)
    np.testing.assert_array_equal(_bits(_convert(dtype, np.dtype(np.float32), every)),
                                  _bits(every.astype(np.float32)))
    rng = np.random.default_rng(11)
    f32 = np.concatenate([
        rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32),
        np.arange(0x33000000, 0x38900000, 211, dtype=np.uint32),  # f16's subnormal range
        np.arange(0x477FE000 - 4000, 0x47800000 + 4000, dtype=np.uint32),  # f16's overflow
        np.arange(0, 1 << 17, dtype=np.uint32)])  # f32 subnormals
    f32 = np.concatenate([f32, f32 | 0x80000000]).view(np.float32)
    with np.errstate(all="ignore"):  # NaN and overflowing casts are what is tested
        f64 = f32.astype(np.float64) * (1 + 1e-9)
    for source in (f32, f64):
        got = _convert(source.dtype, dtype, source)
        # f64 -> bf16 rounds through f32 (as XLA and ml_dtypes); f64 -> f16 once (numpy).
        with np.errstate(all="ignore"):
            want = (source.astype(np.float32) if dtype == BF16 else source).astype(dtype)
        nan = np.isnan(source)
        assert (np.isnan(got.astype(np.float32)) == nan).all()
        np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


# LLVM ops that only move f16/bf16 bits around; any other op on those types would leave a
# rounding decision to the CPU (vcvtneps2bf16, vcvtps2ph, native f16 arithmetic, libcalls).
_MOVES = {"llvm.load", "llvm.store", "llvm.bitcast", "llvm.mlir.constant", "llvm.select",
          "llvm.extractelement", "llvm.insertelement", "llvm.shufflevector", "llvm.mlir.undef",
          "llvm.mlir.poison", "llvm.insertvalue", "llvm.extractvalue", "llvm.intr.masked.load",
          "llvm.intr.masked.store", "llvm.mlir.zero", "llvm.getelementptr", "llvm.alloca",
          "llvm.br", "llvm.cond_br", "llvm.return"}


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
def test_no_float_instruction_on_small_types_is_left_to_the_cpu(dtype: np.dtype) -> None:
    """Whatever this machine has: the LLVM dialect only moves f16/bf16 bits, and has no
    llvm.intr.fmuladd and no `contract` flag (fused or not depending on the CPU)."""
    n = 64
    programs = dict(_programs(dtype, n))
    programs["convert from s32"] = _convert_program(np.dtype(np.int32), dtype, n)
    programs["convert from f64"] = _convert_program(np.dtype(np.float64), dtype, n)
    programs["convert to s8"] = _convert_program(dtype, np.dtype(np.int8), n)
    b = xm.XlaBuilder("mix")
    x = b.parameter(0, xm.Shape.array(dtype, (8, 8)))
    b.select(b.lt(x, b.constant(np.array(1, dtype))), b.tanh(x) + b.dot(x, x), b.sqrt(x) / x)
    programs["mix"] = b.build()
    for what, comp in programs.items():
        text = xm.compile(comp).stages["llvm"]
        # Nor may LLVM contract a multiply and an add where the CPU has FMA.
        assert "fmuladd" not in text and "contract" not in text, what
        for line in text.splitlines():
            if re.search(r"(?<![a-z0-9])(bf16|f16)\b|xbf16|xf16", line):
                op = re.search(r"(?:= |^\s*)(llvm\.[a-z_.0-9]+)", line)
                assert op is None or op.group(1) in _MOVES, f"{what}: {line.strip()}"


def _convert_program(src: np.dtype, dst: np.dtype, n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("convert")
    b.convert_element_type(b.parameter(0, xm.Shape.array(src, (n,))), dst)
    return b.build()


NARROW_FLOATS = [np.dtype(d) for d in (
    ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3b11fnuz,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3, ml_dtypes.float8_e3m4,
    ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu)]


def _narrow_programs(dtype: np.dtype) -> list[tuple[str, xm.XlaComputation, np.ndarray]]:
    """Every bit pattern decoded, arithmetic on them, and f32/f64/s32 inputs rounded to the type."""
    patterns = np.arange(16 if dtype.name == "float4_e2m1fn" else 256, dtype=np.uint8).view(dtype)
    sweep = np.arange(0, 1 << 32, 65521, dtype=np.uint64).astype(np.uint32).view(np.float32)
    sweep = np.concatenate([sweep, patterns.astype(np.float32) * np.float32(1.0625),
                            np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)])
    ints = np.arange(-3000, 3000, 7, dtype=np.int32)
    return [
        ("to f32", _convert_program(dtype, np.dtype(np.float32), patterns.size), patterns),
        ("x * x + x", _unary(dtype, patterns.size, lambda b, x: x * x + x), patterns),
        ("reduce_precision(x, 3, 1)", _unary(dtype, patterns.size, lambda b, x: b.reduce_precision(x, 3, 1)),
         patterns),
        ("from f32", _convert_program(np.dtype(np.float32), dtype, sweep.size), sweep),
        ("from f64", _convert_program(np.dtype(np.float64), dtype, sweep.size), sweep.astype(np.float64) / 3),
        ("from s32", _convert_program(np.dtype(np.int32), dtype, ints.size), ints),
    ]


@pytest.mark.parametrize("target", TARGETS)
def test_narrow_floats_same_bits_on_every_target(target: str) -> None:
    """The narrow floats' conversions are integer code (soft_float): one result everywhere."""
    for dtype in NARROW_FLOATS:
        for what, comp, arg in _narrow_programs(dtype):
            host = xm.compile(comp)(arg)
            got = xm.compile(comp, target_cpu=target)(arg)
            np.testing.assert_array_equal(_bits(got), _bits(host), err_msg=f"{dtype} {what} on {target}")


def test_no_narrow_float_is_left_to_the_cpu() -> None:
    """No LLVM op but moves of bits sees a narrow float type (LLVM has none; a conversion
    left to it would be a libcall or a CPU's own rounding)."""
    for dtype in NARROW_FLOATS:
        for what, comp, _ in _narrow_programs(dtype):
            text = xm.compile(comp).stages["llvm"]
            for line in text.splitlines():
                if re.search(r"\bf[48]E[0-9A-Z]+\b", line):
                    op = re.search(r"(?:= |^\s*)(llvm\.[a-z_.0-9]+)", line)
                    assert op is None or op.group(1) in _MOVES, f"{dtype} {what}: {line.strip()}"
