"""Ahead-of-time export: a C program built against the exported header and library with the
system C compiler prints its results, which must equal the JIT's.

Each export runs mlir-translate, opt, llc and cc (about a second). Tests that build C code
are skipped where there is no C compiler.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm
from xlamlir.runtime.export import c_identifier, export_executable

CC = shlex.split(os.environ.get("CC", "")) or ["cc"]  # as the exporter reads it
needs_cc = pytest.mark.skipif(shutil.which(CC[0]) is None, reason="no C compiler")

F32 = xm.F32

# printf format and C cast per dtype kind: %.9g / %.17g round-trip f32 / f64 exactly.
_PRINT = {"f4": ("%.9g", "double"), "f8": ("%.17g", "double"), "i": ("%lld", "long long"),
          "u": ("%llu", "unsigned long long"), "b": ("%d", "int")}


def _is_half(dtype: np.dtype) -> bool:
    """f16 and bf16: the header's CTYPE is uint16_t, so they travel as bit patterns."""
    return dtype.itemsize == 2 and dtype.kind in "fV"


def _c_literal(value: np.generic) -> str:
    if _is_half(value.dtype):
        return str(int(value.view(np.uint16)))
    if value.dtype.kind == "f":
        suffix = "f" if value.dtype == np.float32 else ""
        if np.isnan(value):
            return f"__builtin_nan{suffix}(\"\")"  # a constant expression in GCC and Clang
        # Hex floats are exact; C99 reads them.
        return float(value).hex() + suffix
    return str(int(value))


def _c_program(name: str, header: str, inputs: list[np.ndarray], results: list[np.dtype]) -> str:
    """A C program calling `name` on `inputs` (embedded as literals) that prints the argument
    dtype macros, then every result element, one per line, then the NULL-pointer return code."""
    lines = ["#include <stdio.h>", f'#include "{header}"', "",
             f"#if {name}_NUM_ARGS != {len(inputs)} || {name}_NUM_RESULTS != {len(results)}",
             "#error \"wrong argument or result counts in the header\"", "#endif", "",
             "int main(void) {"]
    for i, array in enumerate(inputs):
        values = ", ".join(_c_literal(v) for v in array.ravel(order="K")) or "0"
        lines.append(f"  static {name}_ARG{i}_CTYPE a{i}[{name}_ARG{i}_COUNT] = {{{values}}};")
        lines.append(f'  printf("%s\\n", {name}_ARG{i}_DTYPE);')
    for j in range(len(results)):
        lines.append(f"  static {name}_RESULT{j}_CTYPE r{j}[{name}_RESULT{j}_COUNT];")
    lines.append(f"  void *args[] = {{{', '.join(f'a{i}' for i in range(len(inputs))) or '0'}}};")
    lines.append(f"  void *results[] = {{{', '.join(f'r{j}' for j in range(len(results)))}}};")
    lines.append(f"  int rc = {name}(args, results);")
    lines.append('  if (rc != 0) { printf("failed %d\\n", rc); return 1; }')
    for j, dtype in enumerate(results):
        fmt, cast = _PRINT["u"] if _is_half(dtype) else _PRINT.get(dtype.str[1:]) or _PRINT[dtype.kind]
        lines.append(f"  for (long k = 0; k < {name}_RESULT{j}_COUNT; ++k) "
                     f'printf("{fmt}\\n", ({cast})r{j}[k]);')
    lines.append(f'  printf("null %d\\n", {name}(args, (void **)0));')
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def _leaves(value: object) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _build_and_run(library: Path, name: str, inputs: list[np.ndarray],
                   results: list[np.dtype]) -> list[str]:
    """Compile a C program against `library` and its header, run it, return its output lines."""
    work = library.parent
    (work / "main.c").write_text(_c_program(name, library.with_suffix(".h").name, inputs, results))
    lib = library.stem.removeprefix("lib")
    built = subprocess.run([*CC, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", "main", "main.c",
                            f"-L{work}", f"-l{lib}", f"-Wl,-rpath,{work}"],
                           cwd=work, capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    proc = subprocess.run([str(work / "main")], cwd=work, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.splitlines()


def _check_against_jit(comp: xm.XlaComputation, inputs: list[np.ndarray], tmp_path: Path,
                       **options: str) -> Path:
    """Export `comp` (with `options`), run it from C on `inputs` and compare with the JIT;
    the library's path."""
    exe = xm.compile(comp)
    expected = _leaves(exe(*inputs))
    name = c_identifier(comp.name)
    library = tmp_path / f"lib{name}.so"
    export_executable(exe, library, **options)
    assert library.is_file() and library.with_suffix(".h").is_file()
    lines = _build_and_run(library, name, inputs, [e.dtype for e in expected])
    dtypes = [str(s.element_type) for s in exe.parameter_shapes]
    assert lines[:len(inputs)] == dtypes
    values = lines[len(inputs):-1]
    assert len(values) == sum(e.size for e in expected)
    at = 0
    for e in expected:
        got = np.array([float(v) for v in values[at:at + e.size]]).reshape(e.shape)
        want = e.view(np.uint16) if _is_half(e.dtype) else e
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=1e-6, atol=0)
        at += e.size
    assert lines[-1] == "null 1"  # a NULL results array is refused, not dereferenced
    return library


def _axpy(n: int = 8) -> xm.XlaComputation:
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, xm.Shape.array(F32, ()), "alpha")
    x = b.parameter(1, xm.Shape.array(F32, (n,)), "x")
    y = b.parameter(2, xm.Shape.array(F32, (n,)), "y")
    b.add(b.mul(alpha, x), y)
    return b.build()


def _axpy_inputs(n: int = 8) -> list[np.ndarray]:
    return [np.float32(2.5), np.arange(n, dtype=np.float32) / 3, np.ones(n, np.float32)]


@needs_cc
def test_axpy_runs_from_c_without_python_or_mlir(tmp_path: Path, record_property) -> None:
    library = _check_against_jit(_axpy(), _axpy_inputs(), tmp_path)
    size = library.stat().st_size
    record_property("axpy_library_bytes", size)
    print(f"\nexported axpy library: {size} bytes")
    if shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True).stdout
        print(ldd)
        assert "libpython" not in ldd.lower() and "libmlir" not in ldd.lower(), ldd


@needs_cc
def test_parallel_loops_are_exported_sequential(tmp_path: Path) -> None:
    """The JIT runs a large elementwise op on the async runtime's thread pool; the library,
    which links libc and libm only, gets the same program with sequential loops."""
    n = 1 << 18
    assert "mlirAsyncRuntime" in xm.compile(_axpy(n)).stages["llvm"]
    library = _check_against_jit(_axpy(n), _axpy_inputs(n), tmp_path)
    if shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True).stdout
        assert "libmlir" not in ldd.lower(), ldd


def _disassembly(library: Path) -> str:
    objdump = shutil.which("llvm-objdump") or shutil.which("objdump")
    if objdump is None:
        pytest.skip("no objdump")
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                          text=True, check=True).stdout


@needs_cc
@pytest.mark.parametrize("target", [None, "x86-64-v2", "host"])
def test_target_cpu_is_portable_by_default_and_stated(tmp_path: Path, target: str | None) -> None:
    """The default library is x86-64-v3 code (no zmm, even exported on an AVX-512 machine);
    the header names the target and the libraries it links."""
    n = 4096
    options = {} if target is None else {"target_cpu": target}
    library = _check_against_jit(_axpy(n), _axpy_inputs(n), tmp_path, **options)
    header = library.with_suffix(".h").read_text()
    from xlamlir.runtime.targets import host_cpu

    stated = {None: "x86-64-v3", "x86-64-v2": "x86-64-v2", "host": f"host = {host_cpu()}"}[target]
    assert f'#define axpy_TARGET_CPU "{stated}"' in header
    assert f"(-mcpu={stated})" in header
    # An elementwise program allocates nothing and calls nothing.
    assert "links against no shared library at all" in header
    code = _disassembly(library)
    if target is None:
        assert "ymm" in code and "zmm" not in code
    if target == "x86-64-v2":
        assert "xmm" in code and not re.search(r"[yz]mm", code)


@needs_cc
def test_header_states_the_libraries_linked(tmp_path: Path) -> None:
    """docs/export.md's example: z and its sum are computed in the caller's buffers, so
    the library needs no library at all; a product both summed and scaled is a malloc'ed
    temporary, so that one needs libc (and only libc). The header says so, and so does
    the library's dynamic section."""
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, xm.Shape.array(F32, ()))
    x = b.parameter(1, xm.Shape.array(F32, (8,)))
    z = alpha * x + x
    comp = b.build([z, b.reduce(z, b.constant(0.0), lambda acc, v: acc + v, [0])])
    (tmp_path / "none").mkdir()
    library = _check_against_jit(comp, _axpy_inputs()[:2], tmp_path / "none")
    assert "links against no shared library at all" in library.with_suffix(".h").read_text()

    b = xm.XlaBuilder("temp")
    m = b.parameter(0, xm.Shape.array(F32, (8, 8)))
    p = b.dot(m, m)
    comp = b.build([b.reduce(p, b.constant(0.0), lambda acc, v: acc + v, [0, 1]), p * 2.0])
    inputs = [np.arange(64, dtype=np.float32).reshape(8, 8) / 64]
    (tmp_path / "libc").mkdir()
    library = _check_against_jit(comp, inputs, tmp_path / "libc")
    assert "links against libc.so.6 only" in library.with_suffix(".h").read_text()
    if shutil.which("ldd"):
        ldd = subprocess.run(["ldd", str(library)], capture_output=True, text=True).stdout
        assert "libc.so" in ldd and "statically linked" not in ldd, ldd


@needs_cc
def test_export_for_a_cpu_this_machine_cannot_run(tmp_path: Path) -> None:
    """Export does not run the code: any CPU LLVM knows will do; unknown names are refused."""
    exe = xm.compile(_axpy())
    library = tmp_path / "libaxpy.so"
    export_executable(exe, library, target_cpu="sapphirerapids")
    assert '#define axpy_TARGET_CPU "sapphirerapids"' in library.with_suffix(".h").read_text()
    with pytest.raises(xm.ArgumentError, match="x86-64-v3"):
        export_executable(exe, library, target_cpu="pentium-9")
    with pytest.raises(xm.CompileError, match="disagree"):
        export_executable(exe, library, target_cpu="x86-64-v3", cpu="x86-64-v2")


@needs_cc
def test_matmul(tmp_path: Path) -> None:
    b = xm.XlaBuilder("matmul")
    x = b.parameter(0, xm.Shape.array(F32, (6, 5)))
    y = b.parameter(1, xm.Shape.array(F32, (5, 3)))
    b.dot(x, y)
    rng = np.random.default_rng(0)
    _check_against_jit(b.build(), [rng.standard_normal((6, 5), np.float32),
                                   rng.standard_normal((5, 3), np.float32)], tmp_path)


@needs_cc
def test_tuple_result_is_flattened_in_order(tmp_path: Path) -> None:
    b = xm.XlaBuilder("tuple-result")  # the '-' makes the C name tuple_result
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    n = b.parameter(1, xm.Shape.array(xm.S32, (2, 3)))
    comp = b.build([b.exp(x), b.tuple([n * 3, b.convert_element_type(n, xm.F64)])])
    library = _check_against_jit(comp, [np.linspace(-1, 1, 4, dtype=np.float32),
                                        np.arange(6, dtype=np.int32).reshape(2, 3)], tmp_path)
    header = library.with_suffix(".h").read_text()
    assert "int tuple_result(void **args, void **results);" in header
    assert '#define tuple_result_RESULT1_DTYPE "s32"' in header
    assert "#define tuple_result_RESULT2_COUNT 6" in header


@needs_cc
def test_while_loop(tmp_path: Path) -> None:
    b = xm.XlaBuilder("loop")
    if not hasattr(b, "while_"):
        pytest.skip("XlaBuilder.while_ is not implemented yet")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    limit = b.parameter(1, xm.Shape.array(xm.S32, ()))

    def condition(state: xm.XlaOp) -> xm.XlaOp:
        sb = state.builder
        return sb.lt(sb.get_tuple_element(state, 0), sb.get_tuple_element(state, 2))

    def body(state: xm.XlaOp) -> xm.XlaOp:
        sb = state.builder
        i, v, n = (sb.get_tuple_element(state, k) for k in range(3))
        return sb.tuple([i + 1, v * 2.0 + 1.0, n])

    b.while_(condition, body, b.tuple([b.constant(np.int32(0)), x, limit]))
    _check_against_jit(b.build(), [np.float32([0.5, -1, 2, 3]), np.int32(5)], tmp_path)


@needs_cc
def test_column_major_parameter_follows_its_layout(tmp_path: Path) -> None:
    b = xm.XlaBuilder("colmajor")
    x = b.parameter(0, xm.Shape.array(F32, (2, 3), (0, 1)))
    b.transpose(x, (1, 0)) + 1.0
    # The C side gets the data in the parameter's layout: column-major.
    data = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    _check_against_jit(b.build(), [data], tmp_path)
    assert '#define colmajor_ARG0_LAYOUT "{0,1}"' in (tmp_path / "libcolmajor.h").read_text()


@needs_cc
def test_bf16_and_strided_copies(tmp_path: Path) -> None:
    # bf16 conversion needs __truncsfbf2 (older libgcc lacks it) and a strided slice into the
    # result needs memrefCopy (MLIR's runner utils): the library brings its own of both.
    b = xm.XlaBuilder("helpers")
    x = b.parameter(0, xm.Shape.array(F32, (4, 6)))
    comp = b.build([b.convert_element_type(x, xm.BF16), b.slice(x, (0, 1), (4, 5), (2, 2))])
    data = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    data[0, 0], data[0, 1] = np.nan, np.float32(1 + 2**-8)  # a NaN and a rounding tie
    _check_against_jit(comp, [data], tmp_path)


@needs_cc
def test_random_numbers_follow_the_jit_stream(tmp_path: Path) -> None:
    b = xm.XlaBuilder("noise")
    if not hasattr(b, "rng_uniform"):
        pytest.skip("XlaBuilder.rng_uniform is not implemented yet")
    b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)), xm.Shape.array(F32, (5,)))
    exe = xm.compile(b.build())
    export_executable(exe, tmp_path / "libnoise.so")
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "libnoise.h"\n'
        "int main(void) {\n  float r[noise_RESULT0_COUNT];\n  void *results[] = {r};\n"
        "  for (int call = 0; call < 3; ++call) {\n    if (call == 2) noise_seed(7);\n"
        "    if (noise((void **)0, results) != 0) return 1;\n"
        '    for (int k = 0; k < noise_RESULT0_COUNT; ++k) printf("%.9g\\n", r[k]);\n  }\n'
        "  return 0;\n}\n")
    built = subprocess.run([*CC, "-o", "main", "main.c", f"-L{tmp_path}", "-lnoise",
                            f"-Wl,-rpath,{tmp_path}"], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    out = subprocess.run([str(tmp_path / "main")], capture_output=True, text=True, timeout=60)
    # A fresh executable (the compile cache may hold a used one) seeded 0, then reseeded to 7.
    from xlamlir.lowering.ops.rng import set_rng_seed

    set_rng_seed(exe._engine, 0)
    first, second = exe(), exe()
    set_rng_seed(exe._engine, 7)
    expected = np.concatenate([first, second, exe()])
    np.testing.assert_array_equal(np.float32([float(v) for v in out.stdout.split()]), expected)


def test_runtime_bound_calls_are_refused(tmp_path: Path) -> None:
    b = xm.XlaBuilder("hosted")
    if not hasattr(b, "custom_call"):
        pytest.skip("XlaBuilder.custom_call is not implemented yet")
    x = b.parameter(0, xm.Shape.array(F32, (4,)))
    b.custom_call("my_target", [x], xm.Shape.array(F32, (4,)))
    with pytest.raises(xm.CompileError, match="my_target"):
        export_executable(xm.compile(b.build()), tmp_path / "libhosted.so")
    assert not (tmp_path / "libhosted.so").exists()


@pytest.mark.skipif(shutil.which("c++") is None or shutil.which(CC[0]) is None,
                    reason="no C++ compiler")
def test_header_is_valid_cpp(tmp_path: Path) -> None:
    export_executable(xm.compile(_axpy()), tmp_path / "libaxpy.so")
    (tmp_path / "use.cc").write_text(
        '#include "libaxpy.h"\n#include "libaxpy.h"\n'  # twice: the include guard must hold
        "static_assert(axpy_RESULT0_COUNT == 8, \"count\");\n"
        "int call(void **a, void **r) { return axpy(a, r); }\n")
    proc = subprocess.run(["c++", "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           "use.cc"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_c_identifier() -> None:
    assert c_identifier("axpy") == "axpy"
    assert c_identifier("my-comp.v2") == "my_comp_v2"
    assert c_identifier("2d") == "_2d"
    assert c_identifier("main") == "main_"  # would clash with the C program's main
    assert c_identifier("int") == "int_"


_CLI_SOURCE = """
import xlamlir as xm

def build():
    b = xm.XlaBuilder("axpy")
    alpha = b.parameter(0, xm.Shape.array(xm.F32, ()))
    x = b.parameter(1, xm.Shape.array(xm.F32, (8,)))
    y = b.parameter(2, xm.Shape.array(xm.F32, (8,)))
    return b.build(alpha * x + y)
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "xlamlir.cli", *args], capture_output=True,
                          text=True, timeout=300)


@needs_cc
def test_cli_export(tmp_path: Path) -> None:
    source = tmp_path / "model.py"
    source.write_text(_CLI_SOURCE)
    library = tmp_path / "out" / "libaxpy.so"
    proc = _cli("export", str(source), "--function", "build", "--output", str(library))
    assert proc.returncode == 0, proc.stderr
    assert library.is_file() and (tmp_path / "out" / "libaxpy.h").is_file()
    inputs = _axpy_inputs()
    lines = _build_and_run(library, "axpy", inputs, [np.dtype(np.float32)])
    expected = inputs[0] * inputs[1] + inputs[2]
    np.testing.assert_allclose([float(v) for v in lines[3:-1]], expected, rtol=1e-6)
    # Portable by default, like exe.export; --target-cpu picks another.
    assert '"x86-64-v3"' in (tmp_path / "out" / "libaxpy.h").read_text()
    v2 = tmp_path / "v2" / "libaxpy.so"
    proc = _cli("export", str(source), "-f", "build", "-o", str(v2), "--target-cpu", "x86-64-v2")
    assert proc.returncode == 0, proc.stderr
    assert '"x86-64-v2"' in (tmp_path / "v2" / "libaxpy.h").read_text()


def test_cli_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xlamlir.cli import main

    source = tmp_path / "model.py"
    source.write_text(_CLI_SOURCE)
    out = str(tmp_path / "libx.so")
    assert main(["export", str(source), "--function", "nope", "--output", out]) == 1
    assert "no function 'nope'" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.py"), "--function", "build", "--output", out]) == 1
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:  # --function is required: a usage error
        main(["export", str(source), "--output", out])
    assert exit_info.value.code == 2


@needs_cc
def test_tuple_parameter_leaves_follow_their_layouts(tmp_path: Path) -> None:
    # A tuple parameter's leaf laid out {0,1} is read column-major from C, as the header says.
    b = xm.XlaBuilder("tuplelay")
    p = b.parameter(0, xm.Shape.tuple([xm.Shape.array(F32, (2, 3), (0, 1)),
                                       xm.Shape.array(xm.S32, (3,))]))
    b.add(b.get_tuple_element(p, 0), b.convert_element_type(b.get_tuple_element(p, 1), F32), (1,))
    comp = b.build()
    exe = xm.compile(comp)
    assert exe.program_shape() == comp.program_shape()
    x = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    n = np.int32([10, 20, 30])
    library = tmp_path / "libtuplelay.so"
    export_executable(exe, library)
    header = library.with_suffix(".h").read_text()
    assert '#define tuplelay_ARG0_LAYOUT "{0,1}"' in header
    lines = _build_and_run(library, "tuplelay", [x, n], [np.dtype(np.float32)])
    got = np.float32([float(v) for v in lines[2:-1]]).reshape(2, 3)
    np.testing.assert_array_equal(got, x + n)
    np.testing.assert_array_equal(got, exe((x, n)))


@needs_cc
def test_narrow_types_are_one_byte_per_element(tmp_path: Path) -> None:
    # s4 and f8e4m3fn cross the C boundary as bytes holding the bits in their low bits.
    import ml_dtypes

    b = xm.XlaBuilder("narrow")
    x = b.parameter(0, xm.Shape.array(xm.S4, (4,)))
    y = b.parameter(1, xm.Shape.array(xm.F8E4M3FN, (4,)))
    total = b.convert_element_type(x, F32) + b.convert_element_type(y, F32)
    b.tuple([b.convert_element_type(total, xm.F8E4M3FN), b.convert_element_type(x * 3, xm.S4)])
    exe = xm.compile(b.build())
    xs = np.array([-8, -1, 3, 7], dtype=ml_dtypes.int4)
    ys = np.array([0.5, -1.75, 448, 3.0], dtype=ml_dtypes.float8_e4m3fn)
    want_sum, want_x3 = exe(xs, ys)
    library = tmp_path / "libnarrow.so"
    export_executable(exe, library)
    header = library.with_suffix(".h").read_text()
    assert "#define narrow_ARG0_CTYPE uint8_t" in header
    assert '#define narrow_ARG1_DTYPE "f8e4m3fn"' in header
    lines = _build_and_run(library, "narrow", [xs.view(np.uint8), ys.view(np.uint8)],
                           [np.dtype(np.uint8), np.dtype(np.uint8)])
    got = [int(float(v)) for v in lines[2:-1]]
    assert got == [*want_sum.view(np.uint8).tolist(), *want_x3.view(np.uint8).tolist()]
    assert want_x3.tolist() == [(v * 3 + 8) % 16 - 8 for v in (-8, -1, 3, 7)]  # wraps in 4 bits
