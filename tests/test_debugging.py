"""Debugging tools: the reproducer a failing pass leaves (and `xlamlir reproduce`),
`exe.bisect` / `xlamlir bisect`, and the `graph` and `timings` commands.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from mlir import ir
from mlir.dialects import arith

import xlamlir as xm
from xlamlir.cli import main
from xlamlir.lowering.reproducer import mlir_opt_path, replay
from xlamlir.runtime.bisect import _alignment, candidate, close, max_error

N = 8
X = np.linspace(-1, 1, N, dtype=np.float32)
Y = np.arange(N, dtype=np.float32)
EXPECTED = np.exp(X.astype(np.float64)) * 2 + Y


@functools.cache
def comp() -> xm.XlaComputation:
    """exp(x) * 2 + y on f32[8]."""
    b = xm.XlaBuilder("debug")
    x = b.parameter(0, xm.Shape.array(xm.F32, (N,)), "x")
    y = b.parameter(1, xm.Shape.array(xm.F32, (N,)), "y")
    b.add(b.exp(x) * 2.0, y)
    return b.build()


def failure(pipeline: xm.Pipeline) -> xm.CompileError:
    with pytest.raises(xm.CompileError) as e:
        xm.compile(comp(), pipeline)
    return e.value


def printed_command(message: str) -> str:
    lines = message.splitlines()
    return lines[lines.index(next(x for x in lines if x.endswith("run it with:"))) + 1].strip()


def deliberately_failing(op, pass_) -> None:
    """A plugged-in Python pass that always fails (module level: replayable by name)."""
    raise ValueError("deliberately failing pass")


def swap_add_sub(op, pass_) -> None:
    """A wrong pass: every arith.addf becomes an arith.subf."""
    adds = []

    def visit(inner):
        if inner.name == "arith.addf":
            adds.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    for add in adds:
        with ir.InsertionPoint(add), add.location:
            sub = arith.SubFOp(add.operands[0], add.operands[1])
        add.results[0].replace_all_uses_with(sub.result)
        add.erase()


# ---- reproducers of a failing textual pass ---------------------------------------------------


def test_mlir_opt_is_found_in_the_wheel() -> None:
    path = mlir_opt_path()
    assert path is not None and os.path.isabs(path) and os.access(path, os.X_OK)


def test_printed_command_reproduces_a_failure_on_the_xhlo_dialect() -> None:
    """Bufferizing before the lowering fails on an xhlo op: the printed command, run as
    printed, lets mlir-opt parse our (unregistered) ops and fails the same way."""
    error = failure(xm.Pipeline.default().insert_before("linalg", "one-shot-bufferize"))
    folder = Path(error.reproducer)
    assert folder.is_absolute() and str(folder) in str(error)
    for name in ["stage_input.mlir", "pipeline.txt", "README.md", "reproducer.json"]:
        assert (folder / name).is_file(), name
    assert "xhlo.exponential" in (folder / "stage_input.mlir").read_text()
    assert (folder / "pipeline.txt").read_text().strip() == "builtin.module(one-shot-bufferize)"
    command = shlex.split(printed_command(str(error)))
    assert command[0] == mlir_opt_path()
    assert "--allow-unregistered-dialect" in command
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "op was not bufferized" in done.stderr and "xhlo.exponential" in done.stderr
    assert "op was not bufferized" in error.diagnostics


def test_reproducer_holds_the_module_just_before_the_failing_pass_of_a_merged_run() -> None:
    """Without the lowering, one-shot-bufferize (in a merged run of textual passes after
    Python passes) fails in `bufferized`: the reproducer is that one pass, on the module
    the stage's earlier passes left."""
    def mark(op, pass_) -> None:
        op.attributes["debug.marked"] = ir.UnitAttr.get()

    error = failure(xm.Pipeline.default().replace("linalg", "canonicalize")
                    .insert_before("bufferized", mark))
    assert error.stage == "bufferized"
    folder = Path(error.reproducer)
    pipeline = (folder / "pipeline.txt").read_text().strip()
    assert pipeline.startswith("builtin.module(one-shot-bufferize{") and "canonicalize" not in pipeline
    assert "debug.marked" in (folder / "stage_input.mlir").read_text()  # an earlier pass ran
    done = subprocess.run(shlex.split(printed_command(str(error))), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "op was not bufferized" in done.stderr
    assert f"{folder}/stage_input.mlir:" in done.stderr  # errors point into the saved file


def test_xlamlir_reproduce_a_textual_pass(capsys) -> None:
    error = failure(xm.Pipeline.default().insert_before("linalg", "one-shot-bufferize"))
    assert main(["reproduce", error.reproducer]) == 1
    out = capsys.readouterr().out
    assert "op was not bufferized" in out and "failed again" in out


def test_xlamlir_reproduce_says_when_the_pass_now_passes(capsys, tmp_path) -> None:
    error = failure(xm.Pipeline.default().insert_before("linalg", "one-shot-bufferize"))
    folder = Path(error.reproducer)
    manifest = json.loads((folder / "reproducer.json").read_text())
    manifest["command"] = [a.replace("one-shot-bufferize", "cse") for a in manifest["command"]]
    (folder / "reproducer.json").write_text(json.dumps(manifest))
    assert main(["reproduce", str(folder)]) == 0
    assert "did not reproduce" in capsys.readouterr().out


def test_reproduce_of_a_folder_that_is_not_one(capsys, tmp_path) -> None:
    assert main(["reproduce", str(tmp_path)]) == 1
    assert "not a reproducer folder" in capsys.readouterr().err


def test_dump_dir_gets_the_reproducer(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XLAMLIR_DUMP_TO", str(tmp_path))
    error = failure(xm.Pipeline.default().insert_after("fused", "no-such-pass-at-all"))
    assert not hasattr(error, "reproducer") or error.reproducer is None  # a parse error: no input
    error = failure(xm.Pipeline.default().insert_after("fused", deliberately_failing))
    folder = Path(error.reproducer)
    assert folder.parent == tmp_path and (folder / "stage_input.mlir").is_file()


def test_a_reproducer_that_cannot_be_written_does_not_hide_the_error(monkeypatch, tmp_path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    monkeypatch.setenv("XLAMLIR_DUMP_TO", str(not_a_dir))
    error = failure(xm.Pipeline.default().insert_after("fused", deliberately_failing))
    assert "no reproducer written" in str(error)
    assert isinstance(error.__cause__, ValueError)


# ---- reproducers of a failing Python pass ----------------------------------------------------


def test_python_pass_reproducer_names_the_pass_and_replays_in_a_fresh_process() -> None:
    error = failure(xm.Pipeline.default().insert_after("fused", deliberately_failing))
    assert "test_debugging:deliberately_failing" in str(error)
    assert isinstance(error.__cause__, ValueError)  # the cause stays the pass's exception
    folder = Path(error.reproducer)
    # The stage input is the fused stage's module before this pass: linalg, no xhlo ops.
    assert "linalg.generic" in (folder / "stage_input.mlir").read_text()
    cli = Path(sys.executable).parent / "xlamlir"
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "xlamlir.cli"]
    done = subprocess.run([*command, "reproduce", str(folder)], capture_output=True, text=True,
                          timeout=300, cwd="/")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "deliberately failing pass" in done.stdout and "failed again" in done.stdout


def test_python_pass_replay_with_a_fixed_pass() -> None:
    error = failure(xm.Pipeline.default().insert_after("fused", deliberately_failing))
    result = replay(error.reproducer, lambda op, pass_: None)
    assert not result.reproduced


def test_a_lambda_pass_is_replayed_only_when_given() -> None:
    def bad(op, pass_) -> None:
        pass_.signal_pass_failure()

    error = failure(xm.Pipeline.default().insert_before("bufferized", bad))
    assert "cannot be imported by name" in str(error)
    with pytest.raises(xm.ArgumentError, match="closure or lambda"):
        replay(error.reproducer)
    assert replay(error.reproducer, bad).reproduced


# ---- bisect ----------------------------------------------------------------------------------


def test_bisect_names_the_wrong_pass(capsys) -> None:
    exe = xm.compile(comp(), xm.Pipeline.default().insert_after("fused", swap_add_sub))
    assert not np.allclose(exe(X, Y), EXPECTED)
    report = exe.bisect(X, Y)
    assert report.first_bad_pass == "swap_add_sub" and report.stage == "fused"
    assert report.max_error == pytest.approx(2 * Y.max(), rel=1e-6)
    before = [s for s in report.steps if s.index < report.first_bad.index]
    assert before and all(s.ok for s in before)
    assert "first pass that changed the numbers" in str(report) and "swap_add_sub" in str(report)
    assert "swap_add_sub" in capsys.readouterr().out  # printed too


def test_bisect_against_a_numpy_reference() -> None:
    exe = xm.compile(comp())
    report = exe.bisect(X, Y, reference=EXPECTED.astype(np.float32))
    assert report.first_bad is None and "no pass changed" in str(report)
    assert report.final_error < 1e-5
    wrong = exe.bisect(X, Y, reference=EXPECTED.astype(np.float32) + 1)
    assert wrong.first_bad.index == 0 and wrong.first_bad.stage == "linalg"


def test_bisect_checks_its_arguments() -> None:
    with pytest.raises(xm.ArgumentError):
        xm.compile(comp()).bisect(X)


def test_a_pass_inserted_before_a_stage_is_not_in_its_completion() -> None:
    def mine(op, pass_) -> None:
        pass

    default = xm.Pipeline.default()
    p = xm.Pipeline.default().insert_before("fused", mine)
    assert candidate(p, "fused", 1).passes("fused") == [mine] + default.passes("fused")
    assert candidate(p, "fused", 3).passes("fused") == [mine] + default.passes("fused")[:2] + \
        default.passes("fused")[2:]
    replaced = xm.Pipeline.default().replace("fused", [mine])
    assert candidate(replaced, "fused", 1).passes("fused") == [mine] + default.passes("fused")
    assert candidate(replaced, "linalg", 1).passes("fused") == default.passes("fused")
    assert candidate(p, "tiled", 0).passes("fused") == p.passes("fused")
    assert candidate(p, "tiled", 0).passes("hlo") == []


def test_alignment_by_longest_common_subsequence() -> None:
    assert _alignment(["a", "x", "b", "c"], ["a", "b", "c"]) == [0, 0, 1, 2]
    assert _alignment(["x", "c"], ["a", "b", "c"]) == [-1, 2]
    assert _alignment([], ["a"]) == []


def test_errors_of_tuples_nans_and_shapes() -> None:
    a = np.array([1.0, np.nan], np.float32)
    assert max_error((a, np.int32(3)), (a, np.int32(5))) == 2
    assert max_error(a, np.array([1.0, 2.0], np.float32)) == np.inf
    assert max_error(a, a[:1]) == np.inf
    assert close((a, np.int32(3)), (a + 1e-7, np.int32(3)), 1e-5, 1e-6)
    assert not close(a, np.array([1.0, 2.0], np.float32), 1e-5, 1e-6)
    assert not close((a,), (a, a), 1e-5, 1e-6)


# ---- the command line ------------------------------------------------------------------------


MODEL = textwrap.dedent("""
    import xlamlir as xm
    from test_debugging import comp, swap_add_sub

    def build():
        return comp()

    def wrong():
        return xm.compile(comp(), xm.Pipeline.default().insert_after("fused", swap_add_sub))
""")


@pytest.fixture
def model(tmp_path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "y.npy", Y)
    return path


def test_cli_bisect(model, capsys) -> None:
    args = ["--args", str(model.parent / "x.npy"), str(model.parent / "y.npy")]
    assert main(["bisect", str(model), "-f", "wrong", *args]) == 1
    # The pass's number (from 0): every pass of the stages up to and including "fused"
    # comes before it.
    pipeline = xm.Pipeline.default()
    stages = pipeline.stage_names[:pipeline.stage_names.index("fused") + 1]
    number = sum(len(pipeline.passes(s)) for s in stages)
    assert f"first pass that changed the numbers: #{number} 'swap_add_sub' of stage 'fused'" in \
        capsys.readouterr().out
    np.save(model.parent / "ref.npy", EXPECTED.astype(np.float32))
    assert main(["bisect", str(model), *args, "--reference", str(model.parent / "ref.npy")]) == 0
    assert "no pass changed" in capsys.readouterr().out


def test_cli_timings(model, capsys, monkeypatch) -> None:
    monkeypatch.delenv("XLAMLIR_PASS_TIMING", raising=False)
    assert main(["timings", str(model)]) == 0
    out = capsys.readouterr().out
    for piece in ["total", "stage linalg", "lower_xhlo", "stage llvm", "reconcile-unrealized-casts",
                  "JIT"]:
        assert piece in out, piece
    assert "XLAMLIR_PASS_TIMING" not in os.environ  # the command leaves the process as it was


def test_cli_graph_dot(model, capsys) -> None:
    out = model.parent / "g.dot"
    assert main(["graph", str(model), "-o", str(out)]) == 0
    assert out.read_text().startswith('digraph "debug"') and "exponential" in out.read_text()
    assert main(["graph", str(model)]) == 0
    assert capsys.readouterr().out.count("digraph") == 1
    assert main(["graph", str(model), "-f", "wrong"]) == 1
    assert "needs the XlaComputation" in capsys.readouterr().err


def test_cli_graph_svg(model, capsys, monkeypatch) -> None:
    out = model.parent / "g.svg"
    if shutil.which("dot") is None:
        assert main(["graph", str(model), "-o", str(out)]) == 1
        assert "apt-get install graphviz" in capsys.readouterr().err
        return
    assert main(["graph", str(model), "-o", str(out)]) == 0
    assert "<svg" in out.read_text()
    monkeypatch.setenv("PATH", "")
    assert main(["graph", str(model), "-o", str(model.parent / "h.svg")]) == 1
    assert "apt-get install graphviz" in capsys.readouterr().err
