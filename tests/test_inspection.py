"""Inspection: user locations in errors, dumps, stage diffs, compile statistics, graphs,
the op reference and the command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import xlamlir as xm

S = xm.Shape.array
ROOT = Path(__file__).resolve().parent.parent


def _computation(name: str = "inspect") -> xm.XlaComputation:
    b = xm.XlaBuilder(name)
    x = b.parameter(0, S(xm.F32, (4,)), "x")
    total = b.reduce(x, b.constant(np.float32(0)), lambda a, c: a + c, [0])
    b.add(b.exp(x), total)
    return b.build()


def test_shape_error_names_the_users_line() -> None:
    b = xm.XlaBuilder("bad")
    x = b.parameter(0, S(xm.F32, (2,)))
    with pytest.raises(xm.ShapeError) as info:
        b.transpose(x, [1, 0])  # the line the message must name
    assert f"{__file__}:" in str(info.value)
    line = int(str(info.value).rsplit(":", 1)[1].rstrip(")"))
    assert "b.transpose(x, [1, 0])" in Path(__file__).read_text().splitlines()[line - 1]


def test_ops_carry_the_users_file_and_line() -> None:
    b = xm.XlaBuilder("located")
    x = b.parameter(0, S(xm.F32, (2,)))
    b.neg(x)  # this line
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                if text.strip() == "b.neg(x)  # this line")
    comp = b.build()
    located = comp.as_mlir_text(locations=True)
    assert f'loc("{__file__}":{line}:0)' in located and 'loc("negate"(#loc' in located
    assert "loc(" not in comp.as_mlir_text()

    # A pass that fails on an op reports where the user built it.
    def reject_negate(op, pass_) -> None:
        def visit(inner):
            from mlir import ir

            if inner.name == "xhlo.negate":
                raise ValueError(f"negate is not allowed here: {inner.location}")
            return ir.WalkResult.ADVANCE

        op.walk(visit)

    pipeline = xm.Pipeline.default().insert_before("linalg", reject_negate)
    with pytest.raises(xm.CompileError) as info:
        xm.compile(comp, pipeline)
    assert f'"{__file__}":{line}' in str(info.value)


def test_dump_and_dump_env(tmp_path, monkeypatch) -> None:
    exe = xm.compile(_computation("dumped"))
    written = exe.dump(str(tmp_path / "one"))
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == sorted(Path(w).name for w in written)
    assert names[:len(exe.stages)] == [f"{i:02d}_{s}.mlir" for i, s in enumerate(exe.stages)]
    assert (tmp_path / "one" / "00_hlo.mlir").read_text() == exe.stages["hlo"]
    monkeypatch.setenv("XLAMLIR_DUMP_TO", str(tmp_path / "all"))
    monkeypatch.setenv("XLAMLIR_DUMP_PASSES", "1")
    xm.compile(_computation("dumped_by_env"))
    (folder,) = [p for p in (tmp_path / "all").iterdir() if p.name.endswith("dumped_by_env")]
    files = sorted(p.name for p in folder.iterdir())
    assert "01_linalg.mlir" in files
    assert any("linalg_lower_xhlo" in f for f in files)  # one file per pass


def test_stage_diff_and_compile_stats() -> None:
    exe = xm.compile(_computation("stats"))
    diff = exe.stage_diff("hlo", "linalg")
    assert diff.startswith("--- hlo\n+++ linalg\n") and "+" in diff and "linalg.generic" in diff
    with pytest.raises(KeyError):
        exe.stage_diff("hlo", "nope")
    stats = exe.compile_stats
    assert set(stats["stages_s"]) <= set(exe.stages)
    parts = stats["parse_verify_s"] + sum(stats["stages_s"].values()) + stats["jit_s"]
    # The parts are measured back to back: they account for about all of the total.
    assert 0.8 * stats["total_s"] <= parts <= 1.05 * stats["total_s"]
    assert sum(t for _, _, t in stats["passes_s"]) == pytest.approx(sum(stats["stages_s"].values()))
    hits = stats["cache_hits"]
    assert xm.compile(_computation("stats")) is exe and exe.compile_stats["cache_hits"] == hits + 1
    assert "<details>" in exe._repr_html_()


def test_to_dot_is_valid_dot() -> None:
    dot = _computation("graph").to_dot()
    assert dot.startswith('digraph "graph" {') and dot.rstrip().endswith("}")
    assert "subgraph cluster_" in dot and "parameter 0 x" in dot and "reduce" in dot
    assert dot.count("{") == dot.count("}")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    checked = subprocess.run(["dot", "-Tsvg"], input=dot.encode(), capture_output=True)
    assert checked.returncode == 0, checked.stderr.decode()
    assert b"<svg" in checked.stdout


def test_op_reference_is_current() -> None:
    sys.path.insert(0, str(ROOT / "docs"))
    try:
        import generate_ops
    finally:
        sys.path.pop(0)
    committed = (ROOT / "docs" / "ops.md").read_text()
    assert committed == generate_ops.render(), "docs/ops.md is stale: run python docs/generate_ops.py"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xlamlir.cli", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "XLAMLIR_DUMP_TO": ""})


def test_cli_stages_run_and_ops(tmp_path) -> None:
    model = tmp_path / "model.py"
    model.write_text("import numpy as np\nimport xlamlir as xm\n\n"
                     "def build():\n"
                     "    b = xm.XlaBuilder('m')\n"
                     "    x = b.parameter(0, xm.Shape.array(xm.F32, (3,)))\n"
                     "    b.exp(x)\n"
                     "    return b.build()\n")
    out = _cli("stages", str(model), "--stage", "fused")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("// ----- stage fused") and "linalg.generic" in out.stdout
    out = _cli("stages", str(model), "--after-each-pass")
    assert out.returncode == 0 and "after canonicalize" in out.stdout
    out = _cli("stages", str(model), "--stage", "vectorized", "--locations")
    # The vectorized loop still says which line of model.py built the exp.
    assert out.returncode == 0 and f'"{model}":7' in out.stdout and "affine.for" in out.stdout
    out = _cli("stages", str(model), "--stage", "nope")
    assert out.returncode == 1 and "no stage" in out.stderr
    module = tmp_path / "m.mlir"
    namespace: dict = {}
    exec(model.read_text(), namespace)
    module.write_text(namespace["build"]().as_mlir_text())
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.float32))
    out = _cli("run", str(module), "--args", str(tmp_path / "a.npy"), "--output",
               str(tmp_path / "r.npy"))
    assert out.returncode == 0, out.stderr
    np.testing.assert_allclose(np.load(tmp_path / "r.npy"), np.exp(np.arange(3, dtype=np.float32)),
                               rtol=1e-6)
    out = _cli("run", str(module))
    assert out.returncode == 1 and "argument" in out.stderr
    out = _cli("ops")
    assert out.returncode == 0 and out.stdout.startswith("abs(operand)")
    assert "while(init) [cond, body]" in out.stdout
