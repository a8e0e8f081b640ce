"""Stage texts printed when read (lowering/stage_texts.py): a compile prints none of the
stages after the first, a text printed later is the one printing at once gave, and
`exe.stages` behaves as the ordered dict[str, str] the API promises."""

from __future__ import annotations

import copy
import json
import os
import pickle
from collections.abc import Iterator

import ml_dtypes
import numpy as np
import pytest
from mlir import ir
from test_stage_text import softmax

import xlamlir as xm
from xlamlir.dialect.context import reused_context
from xlamlir.lowering import stage_texts
from xlamlir.lowering.pipeline import _LARGE_CONSTANT, ELIDED, Pipeline, readable_stage_text
from xlamlir.runtime import disk_cache
from xlamlir.runtime.compiler import clear_cache
from xlamlir.runtime.lower import parse_module

F32 = xm.F32


@pytest.fixture
def printed() -> Iterator[list[int]]:
    """How many snapshots were printed while the test ran."""
    count = [0]
    original = stage_texts.Snapshot.text

    def counted(self: stage_texts.Snapshot) -> str:
        count[0] += 1
        return original(self)

    stage_texts.Snapshot.text = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        stage_texts.Snapshot.text = original  # type: ignore[method-assign]


def _softmax_with_constant() -> xm.XlaComputation:
    return softmax(64, shifted=True)


def _sort_bf16() -> xm.XlaComputation:
    b = xm.XlaBuilder("lazy_sort")
    b.sort(b.parameter(0, xm.Shape.array(xm.BF16, (4, 300))))
    return b.build()


def _matmul_parallel() -> xm.XlaComputation:
    b = xm.XlaBuilder("lazy_matmul")
    b.dot(b.parameter(0, xm.Shape.array(F32, (256, 256))), b.parameter(1, xm.Shape.array(F32, (256, 256))))
    return b.build()


PROGRAMS = {"softmax": _softmax_with_constant, "sort_bf16": _sort_bf16, "matmul": _matmul_parallel}


def _eager_stages(computation: xm.XlaComputation, locations: bool = False) -> dict[str, str]:
    """Each stage after the first printed right after it ran, shown as exe.stages shows it
    (from the module as compile parses it: with the builder's locations)."""
    text = computation.as_mlir_text(locations=True)
    after: list[tuple[str, str, str]] = []
    with reused_context(len(text)), ir.Location.unknown():
        Pipeline.default().run(parse_module(text, 1), after_each_pass=after, locations=locations)
    raw = {stage: body for stage, _, body in after}  # the last pass's text of each stage
    names = Pipeline.default().stage_names
    return {name: _LARGE_CONSTANT.sub(ELIDED, readable_stage_text(raw[name])) if i < len(names) - 1
            else readable_stage_text(raw[name]) for i, name in enumerate(names) if i > 0}


def test_a_compile_prints_no_stage_after_the_first(printed: list[int], monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: os.PathLike[str]) -> None:
    for cache in ("off", str(tmp_path)):  # the disk cache stores the snapshots as they are
        monkeypatch.setenv("XLAMLIR_CACHE_DIR", cache)
        for make in PROGRAMS.values():
            clear_cache()
            exe = xm.compile(make())
            disk_cache.flush()
            assert printed[0] == 0, make.__name__
            first = next(iter(exe.stages))
            assert exe.stages.printed(first) and not any(exe.stages.printed(s) for s in list(exe.stages)[1:])
    exe.stages["linalg"]
    assert printed[0] == 1  # one stage read, one printed


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_stage_printed_later_is_the_text_printed_at_once(name: str) -> None:
    computation = PROGRAMS[name]()
    clear_cache()
    exe = xm.compile(computation)
    eager = _eager_stages(computation)
    assert list(exe.stages) == Pipeline.default().stage_names
    for stage in reversed(list(exe.stages)[1:]):  # out of order: each prints on its own
        assert exe.stages[stage] == eager[stage], stage
    assert ELIDED in exe.stages["fused"] and ELIDED not in exe.stages["llvm"] or name != "softmax"


def test_stage_locations_survive_the_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XLAMLIR_STAGE_LOCATIONS", "1")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", "off")
    computation = _softmax_with_constant()
    clear_cache()
    exe = xm.compile(computation)
    assert "loc(" in exe.stages["tiled"]
    assert exe.stages["tiled"] == _eager_stages(computation, locations=True)["tiled"]


def test_stages_behave_as_an_ordered_dict_of_texts() -> None:
    clear_cache()
    stages = xm.compile(_softmax_with_constant()).stages
    assert isinstance(stages, dict)
    names = list(stages)
    copied = dict(stages)  # every value printed through __getitem__, never a snapshot
    assert list(copied) == names and all(isinstance(t, str) and "module {" in t for t in copied.values())
    assert {**stages} == copied == stages.copy() and stages == copied and not stages != copied
    assert json.loads(json.dumps(stages)) == copied
    assert pickle.loads(pickle.dumps(stages)) == copied and copy.deepcopy(stages) == copied
    assert stages | {} == copied and {} | stages == copied
    assert [k for k, _ in stages.items()] == names and list(stages.values()) == [copied[n] for n in names]
    assert stages.get("no such stage") is None and stages.get("llvm") == copied["llvm"]
    assert "llvm.func" in repr(stages)


def test_the_bytes_form_round_trips_and_refuses_garbage() -> None:
    clear_cache()
    exe = xm.compile(_sort_bf16())
    exe.stages["fused"]  # one printed, the others still snapshots
    data = exe.stages.to_bytes()
    again = stage_texts.StageTexts.from_bytes(data)
    assert again.printed("hlo") and again.printed("fused") and not again.printed("llvm")
    assert again == exe.stages
    index_end = 4 + int.from_bytes(data[:4], "little")

    def index_edited(old: bytes, new: bytes) -> bytes:
        return data[:4] + data[4:index_end].replace(old, new) + data[index_end:]

    for bad in (data[:-1], data + b"x", data[:3], b"\xff\xff\x00\x00[]", b"\x02\x00\x00\x00[1",
                index_edited(b'"bytecode"', b'"bytecodX"'), index_edited(b'"elided"', b'"elidex"')):
        with pytest.raises(ValueError):
            stage_texts.StageTexts.from_bytes(bad)


def test_a_disk_cache_hit_keeps_the_stages_and_the_parallel_flag(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: os.PathLike[str],
                                                                  printed: list[int]) -> None:
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(tmp_path))
    for make, parallel in ((_matmul_parallel, True), (_sort_bf16, False)):
        printed[0] = 0
        clear_cache()
        first = xm.compile(make())
        disk_cache.flush()
        clear_cache()
        second = xm.compile(make())
        assert second.compile_stats["disk_cache"] == "hit"
        assert second.dispatches_parallel_loops == first.dispatches_parallel_loops == parallel
        assert printed[0] == 0
        assert second.stages == first.stages


def test_the_runner_utils_follow_the_program_types_without_printing(printed: list[int]) -> None:
    # f8 types lower to integer code: no f16 left for LLVM to call a library for.
    for dtype in (xm.F8E4M3FN, xm.F8E5M2, xm.F32, xm.S8, xm.PRED, xm.C64):
        b = xm.XlaBuilder("types")
        x = b.parameter(0, xm.Shape.array(dtype, (64,)))
        b.convert_element_type(b.add(x, x) if dtype != xm.PRED else b.or_(x, x), xm.F32)
        clear_cache()
        exe = xm.compile(b.build())
        assert "f16" not in exe.stages["hlo"]
        printed[0] = 0
        assert "f16" not in exe.stages["llvm"], dtype
    clear_cache()
    exe = xm.compile(_sort_bf16())
    x = np.linspace(-3, 3, 1200).astype(ml_dtypes.bfloat16).reshape(4, 300)[:, ::-1]
    np.testing.assert_array_equal(exe(np.ascontiguousarray(x)), np.sort(x.astype(np.float32), axis=-1)
                                  .astype(ml_dtypes.bfloat16))


def test_only_default_passes() -> None:
    assert Pipeline.default().only_default_passes()
    assert Pipeline.default().sequential().only_default_passes()
    assert not Pipeline.default().insert_after("linalg", "canonicalize{max-iterations=3}") \
        .only_default_passes()
    assert not Pipeline.default().insert_after("linalg", lambda op, p: None).only_default_passes()


def test_a_custom_pipeline_reads_its_last_stage_for_f16(printed: list[int]) -> None:
    # Its own passes might make f16 values: its llvm text is checked (printed once).
    clear_cache()
    pipeline = Pipeline.default().insert_after("llvm", "symbol-dce")
    b = xm.XlaBuilder("custom")
    x = b.parameter(0, xm.Shape.array(F32, (16,)))
    b.add(x, x)
    exe = xm.compile(b.build(), pipeline)
    assert printed[0] == 1 and exe.stages.printed("llvm")
    np.testing.assert_array_equal(exe(np.arange(16, dtype=np.float32)), 2 * np.arange(16, dtype=np.float32))


@pytest.mark.parametrize("seed", [900000 + i for i in range(0, 48, 4)] + [900041])
def test_random_programs_print_the_same_stages(seed: int) -> None:
    # The differential fuzzer's programs: every op family, custom calls, constants.
    from builder_fuzzer import RandomSource
    from differential_fuzzer import make_case

    case = make_case(RandomSource(seed), 10)
    clear_cache()
    exe = xm.compile(case.computation)
    eager = _eager_stages(case.computation)
    for stage in list(exe.stages)[1:]:
        assert exe.stages[stage] == eager[stage], stage
