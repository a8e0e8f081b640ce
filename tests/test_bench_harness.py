"""The benchmark harness (bench/): a wrong result stops a row before timing, a failing
row is reported and skipped, quick mode and the warm-cache subprocess's compile-only mode."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import harness  # noqa: E402
import suite  # noqa: E402
import timing  # noqa: E402

import xlamlir as xm  # noqa: E402


def _double_case(numpy_fn: object) -> harness.Case:
    def build() -> xm.XlaComputation:
        b = xm.XlaBuilder("double")
        return b.build(b.parameter(0, xm.Shape.array(xm.F32, (8,))) * 2.0)

    return harness.Case(build, lambda: (np.arange(8, dtype=np.float32),), numpy_fn, None,
                        work=64, unit="GB/s", repeats=3)


def test_measure_times_a_correct_row() -> None:
    m = harness.measure(_double_case(lambda x: x * np.float32(2)))
    assert m.ours_s > 0 and m.numpy_s > 0 and m.compile_s > 0
    assert m.jax_s is None and m.jax_compile_s is None  # no JAX function given


def test_measure_rejects_a_wrong_result_before_timing() -> None:
    with pytest.raises(AssertionError, match="xlamlir differs"):
        harness.measure(_double_case(lambda x: x * np.float32(3)))


def test_quick_mode_divides_repetitions(monkeypatch: pytest.MonkeyPatch) -> None:
    assert timing.rounds(40) == 40
    monkeypatch.setattr(timing, "QUICK", True)
    assert timing.rounds(40) == 10 and timing.rounds(5) == 3


def test_compile_only_stops_after_the_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "COMPILE_ONLY", True)
    with pytest.raises(timing.CompiledOnly) as done:
        harness.measure(_double_case(lambda x: x * np.float32(2)))
    assert done.value.seconds > 0


def test_a_failing_row_is_reported_and_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> timing.Measurement:
        raise AssertionError("ours differs")

    def fine() -> timing.Measurement:
        return harness.measure(_double_case(lambda x: x * np.float32(2)))

    monkeypatch.setattr(suite, "all_workloads", lambda: [
        timing.Workload("broken row", broken, None), timing.Workload("fine row", fine, None),
        timing.Workload("filtered out", broken, None)])
    monkeypatch.setattr(suite, "RESULTS", tmp_path / "results.json")
    monkeypatch.setattr(suite, "persistent_cache_available", lambda: False)
    assert suite.main(["--quick", "--only", "row"]) == 1
    out = capsys.readouterr().out
    assert "broken row" in out and "SKIPPED: AssertionError: ours differs" in out
    results = json.loads((tmp_path / "results-only.json").read_text())
    assert [r["workload"] for r in results["workloads"]] == ["fine row"]
    assert not (tmp_path / "results.json").exists()  # a filtered run keeps the full run's table
    assert results["failures"] == [{"workload": "broken row", "error": "AssertionError: ours differs"}]


@pytest.mark.skipif(not suite.persistent_cache_available(), reason="no persistent compile cache")
def test_warm_column_is_a_second_process_disk_cache_hit(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setattr(suite, "RESULTS", tmp_path / "results.json")
    monkeypatch.delenv(suite.CACHE_ENV, raising=False)
    assert suite.main(["--quick", "--only", "while 1000"]) == 0
    (row,) = json.loads((tmp_path / "results-only.json").read_text())["workloads"]
    assert row["warm_compile_s"] is not None and row["warm_compile_s"] > 0
    assert suite.CACHE_ENV not in os.environ  # the run's temporary cache is undone


def test_warm_column_is_empty_when_the_cache_is_off(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    monkeypatch.setattr(suite, "RESULTS", tmp_path / "results.json")
    monkeypatch.setenv(suite.CACHE_ENV, "off")
    assert suite.main(["--quick", "--only", "while 1000"]) == 0
    (row,) = json.loads((tmp_path / "results-only.json").read_text())["workloads"]
    assert row["warm_compile_s"] is None


def test_medians_alternate_blocks_of_each_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of ours, numpy and JAX take turns (a slow phase of the machine falls on all
    alike), each library warmed up once, None skipped, every call timed once."""
    monkeypatch.setattr(timing, "SETTLE_S", 0.0)
    monkeypatch.setattr(timing, "QUICK", False)  # suite.main sets it for the process
    calls: list[str] = []
    fns = [lambda: calls.append("a"), None, lambda: calls.append("b")]
    got = timing.medians(fns, 6)
    per_block = -(-6 // timing.BLOCK_ROUNDS)
    first = "a" + per_block * "a" + "b" + per_block * "b"  # each with its warm-up call
    later = per_block * "a" + per_block * "b"
    assert "".join(calls) == first + later * (timing.BLOCK_ROUNDS - 1)
    assert got[1] is None and all(isinstance(t, float) and t >= 0 for t in (got[0], got[2]))


def test_op_survey_times_a_correct_case_and_flags_a_wrong_one(capsys: pytest.CaptureFixture[str]) -> None:
    import op_survey

    assert op_survey.main(["--quick", "--only", "u8 add 4M"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("u8 add 4M") and "ratio" in line
    wrong = op_survey.Case("wrong", [((16,), np.float32)], lambda b, x: b.neg(x), lambda x: x)
    assert "MISMATCH" in op_survey.run(wrong, 1)
