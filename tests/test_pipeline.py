"""Tests of xm.Pipeline: the default stages, inserting and replacing passes
(textual upstream pipelines and Python callables), and the errors a bad
pipeline gives (always xm.CompileError naming the stage, never a crash).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from conftest import isolated
from mlir import ir

import xlamlir as xm
from xlamlir.lowering import pipeline as pipeline_module
from xlamlir.lowering.pass_managers import VERIFY_ENV

N = 8
X = np.linspace(-1, 1, N, dtype=np.float32)
Y = np.arange(N, dtype=np.float32)
EXPECTED = np.exp(X.astype(np.float64)) * 2 + Y


@functools.cache
def comp() -> xm.XlaComputation:
    """exp(x) * 2 + y on f32[8]: four elementwise ops (with the broadcast constant)."""
    b = xm.XlaBuilder("pipe")
    x = b.parameter(0, xm.Shape.array(xm.F32, (N,)), "x")
    y = b.parameter(1, xm.Shape.array(xm.F32, (N,)), "y")
    b.add(b.exp(x) * 2.0, y)
    return b.build()


def check_result(exe: xm.Executable) -> None:
    np.testing.assert_allclose(exe(X, Y), EXPECTED, rtol=1e-6)


def count_ops(op: ir.Operation, name: str) -> int:
    count = 0

    def visit(inner: ir.Operation) -> ir.WalkResult:
        nonlocal count
        count += inner.name == name
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return count


# ---- the default pipeline --------------------------------------------------------------------


def test_default_stage_names() -> None:
    names = xm.Pipeline.default().stage_names
    assert isinstance(names, list) and all(isinstance(n, str) for n in names)
    assert len(set(names)) == len(names)
    for required in ("hlo", "linalg", "bufferized", "llvm"):
        assert required in names
    positions = [names.index(n) for n in ("hlo", "linalg", "bufferized", "llvm")]
    assert positions == sorted(positions)
    assert names[0] == "hlo" and names[-1] == "llvm"
    vectorized = [i for i, n in enumerate(names) if "vector" in n]
    assert vectorized, f"no vectorized stage in {names}"
    assert all(names.index("linalg") < i < names.index("llvm") for i in vectorized)


def test_stages_of_an_executable() -> None:
    exe = xm.compile(comp())
    assert isinstance(exe.stages, dict)
    assert list(exe.stages) == xm.Pipeline.default().stage_names
    assert all(isinstance(t, str) and t for t in exe.stages.values())
    assert exe.stages["hlo"] == comp().as_mlir_text()
    assert '"xhlo.exponential"' in exe.stages["hlo"]
    assert "linalg.generic" in exe.stages["linalg"] and "xhlo." not in exe.stages["linalg"]
    assert "memref<" in exe.stages["bufferized"]
    assert "bufferization.to_tensor" not in exe.stages["bufferized"]
    vectorized = [n for n in exe.stages if "vector" in n]
    assert any("vector<" in exe.stages[n] for n in vectorized)
    llvm = exe.stages["llvm"]
    assert "llvm.func @main" in llvm
    for gone in ("xhlo.", "linalg.", "memref.", "func.func", "affine.", "vector.transfer"):
        assert gone not in llvm, gone
    check_result(exe)


def test_default_returns_a_fresh_pipeline_each_time() -> None:
    pristine = repr(xm.Pipeline.default())
    first = xm.Pipeline.default()
    first.insert_after("linalg", "cse").insert_before("fused", "canonicalize")
    first.replace("llvm", "canonicalize")
    assert repr(first) != pristine
    second = xm.Pipeline.default()
    assert second is not first
    assert repr(second) == pristine
    assert second.stage_names == first.stage_names
    exe = xm.compile(comp(), second)
    assert exe.stages["fused"].count("linalg.generic") == 1
    check_result(exe)


# ---- insert_before / insert_after / replace --------------------------------------------------


def test_methods_chain_and_return_the_pipeline() -> None:
    p = xm.Pipeline.default()
    assert p.insert_after("linalg", "cse") is p
    assert p.insert_after("linalg", "func.func(linalg-generalize-named-ops)") is p
    assert p.insert_before("linalg", "canonicalize") is p
    assert p.replace("fused", "linalg-fuse-elementwise-ops") is p
    assert p.insert_after("fused", "cse").insert_before("loops", "canonicalize").replace(
        "hlo", "canonicalize") is p
    assert p.stage_names == xm.Pipeline.default().stage_names
    exe = xm.compile(comp(), p)
    assert list(exe.stages) == p.stage_names
    check_result(exe)


@pytest.mark.parametrize("method", ["insert_after", "insert_before", "replace"])
@pytest.mark.parametrize("passes", ["cse", lambda op, pass_: None], ids=["text", "callable"])
def test_unknown_stage_is_a_key_error(method, passes) -> None:
    p = xm.Pipeline.default()
    with pytest.raises(KeyError, match="no-such-stage"):
        getattr(p, method)("no-such-stage", passes)
    assert repr(p) == repr(xm.Pipeline.default())


def test_insert_after_textual_pass_joins_the_stage() -> None:
    default = xm.compile(comp())
    assert default.stages["linalg"].count("linalg.generic") > 1
    p = xm.Pipeline.default().insert_after("linalg", "linalg-fuse-elementwise-ops")
    exe = xm.compile(comp(), p)
    assert list(exe.stages) == p.stage_names
    assert exe.stages["linalg"].count("linalg.generic") == 1  # fused already in "linalg"
    check_result(exe)


def test_insert_before_textual_pass_runs_at_the_start_of_the_stage() -> None:
    default = xm.compile(comp())
    assert "scf.for" not in default.stages["vectorized"]  # f32[8]: one vector, no loop
    p = xm.Pipeline.default().insert_before("vectorized", "func.func(convert-linalg-to-loops)")
    exe = xm.compile(comp(), p)
    # linalg became scf loops before the stage's own linalg -> affine conversion could run
    assert "scf.for" in exe.stages["vectorized"]
    assert "affine.for" not in exe.stages["vectorized"]
    assert "linalg.generic" in exe.stages["bufferized"]
    check_result(exe)


def test_insert_into_the_hlo_stage() -> None:
    p = xm.Pipeline.default().insert_after("hlo", "func.func(llvm-request-c-wrappers)")
    exe = xm.compile(comp(), p)
    assert "llvm.emit_c_interface" not in comp().as_mlir_text()
    assert "llvm.emit_c_interface" in exe.stages["hlo"]
    assert '"xhlo.exponential"' in exe.stages["hlo"]
    check_result(exe)


def test_replace_with_a_textual_pass() -> None:
    p = xm.Pipeline.default().replace("fused", "canonicalize")
    exe = xm.compile(comp(), p)
    generics = exe.stages["linalg"].count("linalg.generic")
    assert generics > 1
    assert exe.stages["fused"].count("linalg.generic") == generics  # nothing fused any more
    check_result(exe)


def test_python_passes_before_and_after_a_stage() -> None:
    seen: list[tuple[str, str, int]] = []

    def before(op, pass_) -> None:
        seen.append(("before", op.name, count_ops(op, "linalg.generic")))

    def after(op, pass_) -> None:
        assert callable(pass_.signal_pass_failure)
        seen.append(("after", op.name, count_ops(op, "linalg.generic")))

    p = xm.Pipeline.default().insert_before("fused", before).insert_after("fused", after)
    exe = xm.compile(comp(), p)
    assert [s[:2] for s in seen] == [("before", "builtin.module"), ("after", "builtin.module")]
    assert seen[0][2] > 1, "the pass at the start of 'fused' should see the unfused generics"
    assert seen[1][2] == 1, "the pass at the end of 'fused' should see one fused generic"
    assert list(exe.stages) == p.stage_names
    check_result(exe)


def test_python_pass_gets_a_live_operation() -> None:
    calls = []

    def record(op, pass_) -> None:
        assert isinstance(op, ir.Operation)
        calls.append(count_ops(op, "xhlo.exponential"))

    xm.compile(comp(), xm.Pipeline.default().replace("hlo", record))
    assert calls == [1]


def test_python_pass_that_changes_the_ir_changes_the_stage_text() -> None:
    def mark(op, pass_) -> None:
        for f in op.regions[0].blocks[0].operations:
            if f.operation.name == "func.func":
                f.attributes["xm_test.marker"] = ir.UnitAttr.get()

    p = xm.Pipeline.default().insert_after("hlo", mark)
    exe = xm.compile(comp(), p)
    assert "xm_test.marker" in exe.stages["hlo"]
    assert "xm_test.marker" not in comp().as_mlir_text()
    check_result(exe)


def test_replace_a_stage_with_a_python_pass() -> None:
    ran = []
    p = xm.Pipeline.default().replace("fused", lambda op, pass_: ran.append(op.name))
    exe = xm.compile(comp(), p)
    assert ran == ["builtin.module"]
    assert exe.stages["fused"] == exe.stages["linalg"]
    check_result(exe)


def test_a_modified_pipeline_is_a_different_compilation() -> None:
    default = xm.compile(comp())
    custom = xm.compile(comp(), xm.Pipeline.default().replace("fused", "canonicalize"))
    assert custom is not default
    assert custom.stages["fused"] != default.stages["fused"]
    assert xm.compile(comp()) is default


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["no-such-pass", "canonicalize{", "func.func(cse", "cse,,", "cse{bogus=1}"])
def test_unparsable_textual_pipeline(bad) -> None:
    with pytest.raises(xm.CompileError) as e:
        p = xm.Pipeline.default().insert_after("fused", bad)
        xm.compile(comp(), p)
    assert "fused" in str(e.value)
    assert getattr(e.value, "stage", "fused") == "fused"
    check_result(xm.compile(comp()))  # nothing is left broken


class Boom(Exception):
    pass


def test_python_pass_that_raises() -> None:
    error = Boom("boom")

    def bad(op, pass_) -> None:
        raise error

    with pytest.raises(xm.CompileError, match="linalg") as e:
        xm.compile(comp(), xm.Pipeline.default().insert_after("linalg", bad))
    assert e.value.__cause__ is error
    check_result(xm.compile(comp()))


def test_python_pass_that_raises_in_the_hlo_stage() -> None:
    def bad(op, pass_) -> None:
        raise ValueError("bad hlo pass")

    with pytest.raises(xm.CompileError, match="hlo") as e:
        xm.compile(comp(), xm.Pipeline.default().replace("hlo", bad))
    assert isinstance(e.value.__cause__, ValueError)
    assert str(e.value.__cause__) == "bad hlo pass"


def test_python_pass_that_signals_failure() -> None:
    def fail(op, pass_) -> None:
        pass_.signal_pass_failure()

    with pytest.raises(xm.CompileError, match="bufferized"):
        xm.compile(comp(), xm.Pipeline.default().insert_before("bufferized", fail))
    check_result(xm.compile(comp()))


def _erase_first_return(op, pass_) -> None:
    def visit(inner):
        if inner.name == "func.return":
            inner.erase()
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)


BROKEN_PIPELINES = [
    # (name, make pipeline, stage that must be named, a piece of the MLIR diagnostics)
    ("erase-return-in-linalg",
     lambda: xm.Pipeline.default().insert_after("linalg", _erase_first_return), "linalg",
     "terminator"),
    ("erase-return-in-hlo",
     lambda: xm.Pipeline.default().insert_after("hlo", _erase_first_return), "hlo", "terminator"),
    ("skip-lowering", lambda: xm.Pipeline.default().replace("linalg", "canonicalize"), "bufferized",
     "xhlo.exponential"),
    ("bufferize-before-lowering",
     lambda: xm.Pipeline.default().insert_before("linalg", "one-shot-bufferize"), "linalg",
     "xhlo.exponential"),
]


@isolated
@pytest.mark.parametrize("verify_each_pass", ["1", "0"])
def test_passes_that_break_the_ir(verify_each_pass: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each broken pipeline gives a CompileError naming the stage with MLIR's diagnostics;
    run in a child interpreter, so that a crash fails this test instead of the session.
    With MLIR's verifier after every pass and as compiles run by default (the default
    pipeline's passes verified at the end of their stage, a user's right after it)."""
    monkeypatch.setenv(VERIFY_ENV, verify_each_pass)
    problems = []
    for name, make, stage, diagnostic in BROKEN_PIPELINES:
        try:
            xm.compile(comp(), make())
        except xm.CompileError as e:
            text = str(e)
            if stage not in text:
                problems.append(f"{name}: stage {stage!r} not named in: {text}")
            if diagnostic not in text and diagnostic not in getattr(e, "diagnostics", ""):
                problems.append(f"{name}: diagnostics lack {diagnostic!r}: {text}")
        except Exception as e:  # noqa: BLE001
            problems.append(f"{name}: {type(e).__name__} instead of CompileError: {e}")
        else:
            problems.append(f"{name}: compiled without an error")
    check_result(xm.compile(comp()))
    assert not problems, "\n".join(problems)


@isolated
def test_an_invalid_module_from_a_default_pass_is_caught_at_the_end_of_its_stage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The default pipeline's passes run without MLIR's verifier after each; the stage's
    result is verified, and a failure replays the stage with it to name the pass."""
    monkeypatch.setenv(VERIFY_ENV, "0")
    monkeypatch.setattr(pipeline_module, "_DEFAULT_PASSES",
                        [*pipeline_module._DEFAULT_PASSES, _erase_first_return])
    pipeline = xm.Pipeline.default().insert_after("linalg", _erase_first_return)
    with pytest.raises(xm.CompileError) as e:
        xm.compile(comp(), pipeline)
    text = str(e.value)
    assert "stage 'linalg'" in text and "_erase_first_return" in text, text
    assert "terminator" in text + e.value.diagnostics, text
    assert e.value.failed_pass is _erase_first_return
    assert e.value.reproducer is not None, text
    check_result(xm.compile(comp()))


def test_which_passes_run_without_the_verifier_after_each() -> None:
    from xlamlir.lowering.passes import schedules

    assert pipeline_module._is_default("canonicalize")  # the same upstream pass as ours
    assert pipeline_module._is_default(schedules.schedule_contractions)
    # Another CPU's schedule (xm.compile(..., target_cpu=...)) is ours too.
    assert pipeline_module._is_default(schedules.scheduler(schedules.Params.for_target("x86-64-v3")))
    assert not pipeline_module._is_default("canonicalize{max-iterations=3}")
    assert not pipeline_module._is_default(_erase_first_return)


@isolated
def test_pipeline_that_never_reaches_llvm() -> None:
    """Stopping short of the LLVM dialect fails when the code is generated, with MLIR's
    diagnostic in the error (not only printed on stderr)."""
    with pytest.raises(xm.CompileError) as e:
        xm.compile(comp(), xm.Pipeline.default().replace("llvm", "canonicalize"))
    text = str(e.value) + getattr(e.value, "diagnostics", "")
    assert "func.func" in text, text  # the op that cannot be translated
