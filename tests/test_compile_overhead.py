"""Per-process and per-compile fixed costs of compiling (issue #17). Structure only: the
machine is shared, so no timing is asserted.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from mlir import ir
from mlir.passmanager import PassManager

import xlamlir as xm
from xlamlir.dialect import context as contexts
from xlamlir.dialect.context import new_context
from xlamlir.runtime.compiler import clear_cache
from xlamlir.runtime.jit_symbols import external_symbols, in_process, needs_runtime_libraries

ROOT = Path(__file__).resolve().parents[1]


def _module(declarations: str, body_type: str = "f32") -> tuple[ir.Module, str]:
    text = f"""
    module {{
      {declarations}
      llvm.func @main(%a: {body_type}) -> {body_type} {{
        llvm.return %a : {body_type}
      }}
    }}"""
    return ir.Module.parse(text, context=new_context()), text


def test_external_symbols_are_the_declared_functions_and_globals() -> None:
    module, _ = _module("llvm.func @expf(f32) -> f32\n"
                        "llvm.mlir.global external @outside() : i32\n"
                        "llvm.mlir.global internal @inside(3 : i32) : i32")
    assert external_symbols(module) == ["expf", "outside"]


def test_the_runner_utils_only_for_symbols_the_process_lacks() -> None:
    def needs(declarations: str, bound: tuple[str, ...] = (), body_type: str = "f32") -> bool:
        module, text = _module(declarations, body_type)
        return needs_runtime_libraries(module, "f16" in text, bound)

    assert not needs("")
    assert not needs("llvm.func @expf(f32) -> f32\nllvm.func @malloc(i64) -> !llvm.ptr")
    # memrefCopy lives in the runner utils: needed unless an earlier compile of this
    # process loaded them (the full suite runs many).
    assert needs("llvm.func @memrefCopy(i64, !llvm.ptr, !llvm.ptr)") == (not in_process("memrefCopy"))
    assert needs("llvm.func @no_such_symbol_anywhere(f32) -> f32")
    # A custom call's trampoline is the engine's own symbol.
    assert not needs("llvm.func @_mlir_ciface_my_target(!llvm.ptr)", bound=("my_target",))
    assert needs("llvm.func @_mlir_ciface_my_target(!llvm.ptr)", bound=("other",))
    # LLVM may call a library for 16-bit float conversions it was never told of.
    assert needs("", body_type="bf16") and needs("", body_type="f16")


def test_a_compile_loads_the_runner_utils_only_when_its_code_calls_them() -> None:
    # A fresh process: axpy leaves libMLIR unloaded; so does a column-major parameter
    # returned in a tuple (a strided copy: a linalg copy since lowering/passes/
    # strided_copies.py); without that pass it is copied by memrefCopy, which loads
    # libMLIR, and every result is right.
    script = """
        import numpy as np
        import xlamlir as xm
        def loaded():
            return "libmlir_c_runner_utils" in open("/proc/self/maps").read()
        b = xm.XlaBuilder("axpy")
        x = b.parameter(0, xm.Shape.array(xm.F32, (5,)))
        b.add(b.mul(b.constant(np.float32(2)), x), x)
        y = xm.compile(b.build())(np.arange(5, dtype=np.float32))
        print(loaded(), y.tolist() == [0.0, 3.0, 6.0, 9.0, 12.0])
        b = xm.XlaBuilder("layouts")
        x = b.parameter(0, xm.Shape.array(xm.F32, (3, 5), (0, 1)))
        b.tuple([x, b.add(x, x)])
        data = np.asfortranarray(np.arange(15, dtype=np.float32).reshape(3, 5))
        first, second = xm.compile(b.build())(data)
        print(loaded(), (first == data).all() and (second == 2 * data).all())
        p = xm.Pipeline.default()
        p.replace("bufferized", [s for s in p.passes("bufferized")
                                 if getattr(s, "__name__", "") != "strided_copies_as_loops"])
        first, second = xm.compile(b.build(), p)(data)
        print(loaded(), (first == data).all() and (second == 2 * data).all())
    """
    env = {**os.environ, "XLAMLIR_CACHE_DIR": "off", "PYTHONPATH": str(ROOT.parent)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True", "False", "True", "True", "True"]


def _program(name: str, op: str) -> xm.XlaComputation:
    b = xm.XlaBuilder(name)
    x = b.parameter(0, xm.Shape.array(xm.F32, (37,)))
    if op == "mul":
        b.mul(x, x)
    else:
        getattr(b, op)(x)
    return b.build()


def test_pass_managers_are_parsed_once_per_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contexts, "_reused", threading.local())
    clear_cache()
    xm.compile(_program("first", "mul"))
    cache = contexts.context_cache(contexts._reused.state[0])
    # The cache also keeps other per-context things (the lowering patterns, the parallel
    # loops' shared functions); the pass managers are those keyed by their pipeline text
    # (with whether they verify after each pass, and the op they run on).
    kept = {key: pm for key, pm in cache.items() if isinstance(pm, PassManager)}
    assert kept and all(isinstance(key, tuple) and isinstance(key[0], str) for key in kept)
    xm.compile(_program("second", "exp"))
    assert all(cache[spec] is pm for spec, pm in kept.items())
    # Any other context keeps nothing.
    assert contexts.context_cache(new_context()) is None


def test_reused_pass_managers_give_the_stages_of_fresh_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # The second program loads dialects the first did not (math, complex): a reused
    # canonicalize must see their patterns as a fresh one does.
    def complex_program() -> xm.XlaComputation:
        b = xm.XlaBuilder("complex_abs")
        x = b.parameter(0, xm.Shape.array(xm.C64, (19,)))
        b.add(b.abs(b.mul(x, x)), b.tanh(b.real(x)))
        return b.build()

    monkeypatch.setattr(contexts, "_reused", threading.local())
    clear_cache()
    xm.compile(_program("first", "mul"))
    reused = xm.compile(complex_program()).stages
    monkeypatch.setattr(contexts, "_reused", threading.local())
    clear_cache()
    fresh = xm.compile(complex_program()).stages
    assert reused == fresh


def test_the_jit_gets_every_function_but_the_c_interfaces_internal() -> None:
    from xlamlir.runtime.jit_linkage import internalize

    module = ir.Module.parse("""
    module {
      llvm.func @expf(f32) -> f32
      llvm.func @main(%a: f32) -> f32 attributes {no_inline} {
        %b = llvm.call @expf(%a) : (f32) -> f32
        llvm.return %b : f32
      }
      llvm.func @main_parallel_0_body(%a: f32) -> f32 {
        llvm.return %a : f32
      }
      llvm.func linkonce @kept_linkonce(%a: f32) -> f32 {
        llvm.return %a : f32
      }
      llvm.func @_mlir_ciface_main(%a: f32) -> f32 attributes {llvm.emit_c_interface} {
        %b = llvm.call @main(%a) : (f32) -> f32
        llvm.return %b : f32
      }
    }""", context=new_context())
    internalize(module)
    linkage = {ir.StringAttr(op.attributes["sym_name"]).value: str(op.attributes["linkage"])
               for op in module.body.operations}
    assert linkage == {"expf": "#llvm.linkage<external>", "main": "#llvm.linkage<internal>",
                       "main_parallel_0_body": "#llvm.linkage<internal>",
                       "kept_linkonce": "#llvm.linkage<linkonce>",
                       "_mlir_ciface_main": "#llvm.linkage<external>"}
    assert module.operation.verify()


def test_the_machine_code_has_no_packed_wrapper_but_the_entry(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The ExecutionEngine packs every function of external linkage (`_mlir_<name>`); the
    # program is called only through `_mlir__mlir_ciface_main`, the random state global
    # is still found by name, and the parallel loop's results are numpy's.
    monkeypatch.setenv("XLAMLIR_KEEP_OBJECT", "1")
    clear_cache()
    b = xm.XlaBuilder("noisy")
    x = b.parameter(0, xm.Shape.array(xm.F32, (1 << 16,)))
    noise = b.rng_uniform(b.constant(np.float32(0)), b.constant(np.float32(1)),
                          xm.Shape.array(xm.F32, (1 << 16,)))
    b.tuple([b.add(b.mul(x, x), x), noise])
    exe = xm.compile(b.build())
    data = np.linspace(-3, 3, 1 << 16, dtype=np.float32)
    squares, first = exe(data)
    np.testing.assert_array_equal(squares, data * data + data)
    exe.seed(0)
    np.testing.assert_array_equal(exe(data)[1], first)
    exe.write_object(str(tmp_path / "code.o"))
    code = (tmp_path / "code.o").read_bytes()
    assert b"\0_mlir__mlir_ciface_main\0" in code
    assert b"\0_mlir_main\0" not in code and b"_mlir_main_parallel_0_body\0" not in code
    clear_cache()
