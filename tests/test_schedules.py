"""The "tiled" stage: matmul and convolution schedules (lowering/schedules.py).

IR tests show that packing, fusion of the epilogue into the matmul's parallel
loop, register-tile vectorization (vector.fma on the accumulator rows) and the
multi-core split (scf.forall, thread-pool tasks from the "loops" stage on) happen for the issue's
workloads; numeric tests compare the scheduled path with numpy across shapes that
are not multiples of the tile sizes (N and F too: the rest is a narrower panel), and
check that ops the schedules do not handle keep the old path.

Both register tiles the library picks (6 x 16 for AVX2, 8 x 32 for AVX-512;
`Params.for_target`) are tested on every host, through pipelines whose "tiled" stage
is `scheduler(Params(...))`: LLVM splits 32-wide vectors into two ymm where there is
no AVX-512, so an AVX2 machine checks the AVX-512 schedules too.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import check_ir
from targets_support import compile_for

import xlamlir as xm
from xlamlir.lowering import schedules


@pytest.fixture(autouse=True)
def strict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schedule that fails raises here (it falls back to the generic path otherwise)."""
    monkeypatch.setattr(schedules, "STRICT", True)


def _matmul(m: int, k: int, n: int, dtype: xm.PrimitiveType = xm.F32) -> xm.XlaComputation:
    b = xm.XlaBuilder("mm")
    b.dot(b.parameter(0, xm.Shape.array(dtype, (m, k))), b.parameter(1, xm.Shape.array(dtype, (k, n))))
    return b.build()


def _dense_relu(m: int, k: int, n: int) -> xm.XlaComputation:
    b = xm.XlaBuilder("dense")
    x = b.parameter(0, xm.Shape.array(xm.F32, (m, k)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (k, n)))
    bias = b.parameter(2, xm.Shape.array(xm.F32, (n,)))
    y = b.add(b.dot(x, w), b.broadcast_in_dim(bias, (m, n), (1,)))
    b.max(y, b.broadcast(b.constant(np.float32(0)), (m, n)))
    return b.build()


def _conv(batch: int, hw: int, c: int, f: int, padding: str = "SAME") -> xm.XlaComputation:
    b = xm.XlaBuilder("conv")
    b.conv_general_dilated(b.parameter(0, xm.Shape.array(xm.F32, (batch, hw, hw, c))),
                           b.parameter(1, xm.Shape.array(xm.F32, (3, 3, c, f))), (1, 1), padding,
                           dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return b.build()


def _numpy_conv(x: np.ndarray, k: np.ndarray, padding: str) -> np.ndarray:
    if padding == "SAME":
        x = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(1, 2))  # n,oh,ow,c,3,3
    n, oh, ow = windows.shape[:3]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, -1)
    return (cols @ k.reshape(cols.shape[1], -1)).reshape(n, oh, ow, -1)


def _rand(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _scheduled(exe: xm.Executable) -> bool:
    return "vector.fma" in exe.stages["tiled"]


def _name(p: schedules.Params) -> str:
    return f"{p.mr}x{p.nr}-{p.threads}t"


# The tiles of `Params.for_target` (AVX2, AVX-512) on two cores, and on one (each core
# then packs all the panels inside its k blocks: the other packing path).
TILES = [schedules.Params(threads=2, mr=6, nr=16), schedules.Params(threads=2, mr=8, nr=32)]
ALL_TILES = TILES + [schedules.Params(threads=1, mr=6, nr=16), schedules.Params(threads=1, mr=8, nr=32)]
# Built once and kept: the compile cache knows a pipeline's Python passes by id().
_PIPELINES = {_name(p): xm.Pipeline.default().replace("tiled", schedules.scheduler(p)) for p in ALL_TILES}


def _compile(computation: xm.XlaComputation, p: schedules.Params) -> xm.Executable:
    return xm.compile(computation, _PIPELINES[_name(p)])


tiles = pytest.mark.parametrize("p", TILES, ids=_name)
all_tiles = pytest.mark.parametrize("p", ALL_TILES, ids=_name)


# -- IR ----------------------------------------------------------------------------------------------

@tiles
def test_matmul_is_packed_tiled_vectorized_and_parallel(p: schedules.Params) -> None:
    exe = _compile(_matmul(1024, 1024, 1024), p)
    # One parallel loop; each core takes half of the column panels and packs B's blocks
    # for them into contiguous NR-column panels (Bp[N/NR, K, NR]) with vector copies right
    # before using them; the register tile is MR rows x NR columns: MR broadcasts of A and
    # MR fmas per k step on a loop-carried accumulator (in registers).
    check_ir(exe.stages["tiled"], f"""
        CHECK: scf.forall ({{{{.*}}}}) in (2)
        CHECK: vector.transfer_read {{{{.*}}}} : tensor<8x1x{p.nr}xf32>, vector<{{{{.*}}}}>
        CHECK: vector.transfer_write {{{{.*}}}} : vector<{{{{.*}}}}{p.nr}xf32>, tensor<1x8x{p.nr}xf32>
        CHECK: scf.for {{{{.*}}}} iter_args({{{{.*}}}}) -> (vector<{p.mr}x{{{{(1x)?}}}}{p.nr}xf32>)
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<{p.nr}xf32>
        CHECK: scf.yield {{{{.*}}}} : vector<{p.mr}x{{{{(1x)?}}}}{p.nr}xf32>
        CHECK: scf.forall.in_parallel
    """)
    assert exe.stages["tiled"].count("scf.forall (") == 1
    assert "linalg.matmul" not in exe.stages["tiled"]
    # The parallel loop runs as tasks on the runtime's thread pool (parallel_tasks.py).
    assert "call @main_parallel_0(" in exe.stages["loops"]
    assert "mlirAsyncRuntimeExecute" in exe.stages["llvm"]
    # The product is computed straight into the output buffer (no temporary + copy).
    assert "memref.copy" not in exe.stages["bufferized"]


@tiles
def test_dense_relu_epilogue_is_fused_into_the_matmul_loop(p: schedules.Params) -> None:
    exe = _compile(_dense_relu(256, 1024, 1024), p)
    tiled = exe.stages["tiled"]
    assert _scheduled(exe)
    # The bias add and relu run inside the same scf.forall as the contraction, on each
    # thread's block of the product, vectorized, before the block is handed back.
    forall = tiled[tiled.rindex("scf.forall ("):]
    body = forall[:forall.index("scf.forall.in_parallel")]
    assert "vector.fma" in body
    assert "arith.addf" in body and ("arith.maximumf" in body or "arith.select" in body)
    assert body.rindex("arith.addf") > body.rindex("vector.fma")
    assert "linalg.generic" not in tiled
    # The epilogue updates the product in place: no temporary for the product.
    assert "memref.copy" not in exe.stages["bufferized"]
    # The only temporary is the packed block of B ([16 panels, 256 deep, NR]).
    allocs = re.findall(r"memref\.alloc\(\).*: (memref<[^>]*>)", exe.stages["bufferized"])
    assert set(allocs) == {f"memref<16x256x{p.nr}xf32>"}


@tiles
def test_columns_beyond_the_last_whole_panel_are_a_narrower_panel(p: schedules.Params) -> None:
    # N = 200: 192 columns in NR-wide panels, then one 8-wide panel with an MR x 8
    # register tile; the bias + relu fused into both parts; both written in place.
    exe = _compile(_dense_relu(128, 256, 200), p)
    tiled = exe.stages["tiled"]
    check_ir(tiled, f"""
        CHECK: scf.forall
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<{p.nr}xf32>
        CHECK: arith.{{{{maximumf|select}}}}
        CHECK: scf.forall.in_parallel
        CHECK: scf.forall
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<8xf32>
        CHECK: arith.{{{{maximumf|select}}}}
        CHECK: scf.forall.in_parallel
    """)
    assert "linalg.generic" not in tiled
    assert "memref.copy" not in exe.stages["bufferized"]
    # The narrow panel's B (256 x 8 floats) is packed by a plain loop, not a parallel one.
    assert tiled.count("scf.forall (") == 2


@tiles
def test_an_odd_panel_count_is_split_across_the_cores_nearly_evenly(p: schedules.Params) -> None:
    # 31 panels with 32-wide tiles: 16 and 15 per core (62 with 16-wide ones: 31 each),
    # each packing its own panels inside its k blocks: one parallel loop, no B-wide packing.
    exe = _compile(_matmul(96, 128, 31 * 32), p)
    tiled = exe.stages["tiled"]
    assert re.findall(r"scf\.forall \(.*\) in \((\d+(?:, \d+)*)\)", tiled) == ["2"]
    check_ir(tiled, f"""
        CHECK: scf.forall
        CHECK: vector.transfer_write {{{{.*}}}} : vector<{{{{.*}}}}{p.nr}xf32>, tensor<1x8x{p.nr}xf32>
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<{p.nr}xf32>
    """)
    lhs, rhs = _rand((96, 128), 0), _rand((128, 31 * 32), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)


@tiles
def test_a_narrow_column_part_of_little_work_runs_on_one_core(p: schedules.Params) -> None:
    # N = 264: 256 columns in whole panels on both cores, then 8 (3% of the work) in one
    # sequential loop nest: no second parallel loop (compile time).
    exe = _compile(_matmul(96, 128, 264), p)
    tiled = exe.stages["tiled"]
    check_ir(tiled, f"""
        CHECK: scf.forall ({{{{.*}}}}) in (2)
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<{p.nr}xf32>
        CHECK: scf.forall.in_parallel
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<8xf32>
    """)
    assert re.findall(r"scf\.forall \(.*\) in \((\d+(?:, \d+)*)\)", tiled) == ["2"]
    lhs, rhs = _rand((96, 128), 0), _rand((128, 264), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)


@tiles
def test_conv_is_tiled_vectorized_and_parallel(p: schedules.Params) -> None:
    exe = _compile(_conv(8, 56, 64, 64), p)
    tiled = exe.stages["tiled"]
    assert "linalg.conv_2d_nhwc_hwcf" not in tiled
    check_ir(tiled, f"""
        CHECK: scf.forall ({{{{.*}}}}) in (2)
        CHECK: scf.for {{{{.*}}}} iter_args({{{{.*}}}}) -> (vector<{p.mr}x{p.nr}xf32>)
        CHECK: scf.for {{{{.*}}}} iter_args({{{{.*}}}}) -> (vector<{p.mr}x{p.nr}xf32>)
        CHECK: scf.for {{{{.*}}}} iter_args({{{{.*}}}}) -> (vector<{p.mr}x{p.nr}xf32>)
        CHECK-COUNT-{p.mr}: vector.fma {{{{.*}}}} : vector<{p.nr}xf32>
    """)


def test_conv_channels_beyond_the_last_whole_panel_are_a_narrower_tile() -> None:
    # F = 48 with 32-wide tiles: the channel loop's last (16-wide) iteration is peeled.
    exe = _compile(_conv(1, 20, 8, 48), TILES[1])
    check_ir(exe.stages["tiled"], """
        CHECK: scf.forall
        CHECK: vector.fma {{.*}} : vector<32xf32>
        CHECK: vector.fma {{.*}} : vector<16xf32>
        CHECK: scf.forall.in_parallel
    """)


def test_schedule_stage_can_be_replaced() -> None:
    p = xm.Pipeline.default().replace("tiled", [])
    exe = xm.compile(_matmul(128, 128, 128), p)
    assert "linalg.matmul" in exe.stages["tiled"] and not _scheduled(exe)
    lhs, rhs = _rand((128, 128), 0), _rand((128, 128), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs @ rhs, rtol=1e-4, atol=1e-3)


def test_last_script_is_the_applied_transform_script() -> None:
    _compile(_matmul(100, 64, 64), TILES[0])  # 50 rows per thread: 8 register tiles and a peeled one
    script = schedules.last_script()
    assert "transform.named_sequence @__transform_main" in script
    assert "transform.structured.tile_using_forall" in script and "transform.loop.peel" in script


# -- tiles per target ----------------------------------------------------------------------------

@pytest.mark.parametrize("cpu, mr, nr", [
    ("x86-64-v4", 8, 32), ("skylake-avx512", 8, 32), ("sapphirerapids", 8, 32), ("znver4", 8, 32),
    ("Icelake-Server", 8, 32),
    ("novalake", 8, 32), ("x86-64-v3", 6, 16), ("x86-64-v2", 6, 16), ("x86-64", 6, 16),
    ("haswell", 6, 16), ("znver3", 6, 16), ("alderlake", 6, 16), ("sierraforest", 6, 16),
    ("goldmont", 6, 16),
])
def test_params_for_target_cpu(cpu: str, mr: int, nr: int) -> None:
    p = schedules.Params.for_target(cpu)
    assert (p.mr, p.nr) == (mr, nr) and p.threads >= 1


@pytest.mark.parametrize("cpu, kc", [
    ("skylake-avx512", 256), ("sapphirerapids", 256), ("Icelake-Server", 256), ("novalake", 256),
    ("znver4", 1024), ("znver5", 1024), ("x86-64-v4", 1024), ("x86-64-v3", 1024), ("znver3", 1024),
])
def test_k_blocks_per_target_cpu(cpu: str, kc: int) -> None:
    # AVX-512: 256 deep on Intel's, 1024 on AMD's and the generic x86-64-v4.
    assert schedules.Params.for_target(cpu).kc == kc


@pytest.mark.parametrize("avx512, nr", [(True, 32), (False, 16)])
def test_params_for_host_reads_the_cpu_flags(monkeypatch: pytest.MonkeyPatch, avx512: bool, nr: int) -> None:
    monkeypatch.setattr(schedules, "_host_has_avx512", lambda: avx512)
    assert schedules.Params.for_target().nr == nr
    host = schedules.Params.for_host()
    assert schedules.Params.for_target("host") == host == schedules.Params.for_target("native")


@pytest.mark.parametrize("intel, kc", [(True, 256), (False, 1024)])
def test_params_for_host_reads_the_vendor(monkeypatch: pytest.MonkeyPatch, intel: bool, kc: int) -> None:
    monkeypatch.setattr(schedules, "_host_has_avx512", lambda: True)
    monkeypatch.setattr(schedules, "_host_is_intel", lambda: intel)
    assert schedules.Params.for_target("host").kc == kc


def test_both_avx512_k_blocks_compute_the_product() -> None:
    # Intel's 256-deep and AMD's 1024-deep blocks on any host (targets_support), with an
    # epilogue, K past one block of either: each tile's sums run in K order either way,
    # so the same bits.
    rng = np.random.default_rng(8)
    x = rng.standard_normal((256, 1100)).astype(np.float32)
    w = rng.standard_normal((1100, 384)).astype(np.float32)
    bias = rng.standard_normal(384).astype(np.float32)
    b = xm.XlaBuilder("dense")
    xp = b.parameter(0, xm.Shape.array(xm.F32, x.shape))
    wp = b.parameter(1, xm.Shape.array(xm.F32, w.shape))
    bp = b.parameter(2, xm.Shape.array(xm.F32, bias.shape))
    y = b.max(b.add(b.dot(xp, wp), b.broadcast_in_dim(bp, (256, 384), [1])), b.constant(np.float32(0)))
    want = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + bias, 0)
    results = []
    for cpu in ("sapphirerapids", "znver4"):
        exe = compile_for(b.build(y), cpu)
        assert _scheduled(exe), cpu
        results.append(exe(x, w, bias))
        np.testing.assert_allclose(results[-1], want, rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(results[0].view(np.uint32), results[1].view(np.uint32))


@pytest.mark.parametrize("cpu, deep", [
    ("skylake-avx512", True), ("sapphirerapids", True), ("znver4", False), ("x86-64-v4", False),
    ("x86-64-v3", False),
])
def test_deep_blocks_per_target_cpu(cpu: str, deep: bool) -> None:
    # Intel's AVX-512 tiles go 12 x 32, 1024 deep (4 panels) for a large C; the rest are
    # 1024 deep already.
    p = schedules.Params.for_target(cpu)
    assert p.deep == (schedules.DeepBlocks(mr=12, mc=96, nc=4, kc=1024) if deep else None)


@pytest.mark.parametrize("m, n, blocks", [
    # C 2 MB: 1 MB a core. 64 rows: the largest divisor of 1024 up to the 96 of mc.
    (1024, 512, "[4x32 columns, 64 rows, 1024 deep], registers 12x32"),
    # 512 KB a core: C stays in L2 across the 256-deep blocks
    (256, 1024, "[8x32 columns, 64 rows, 256 deep], registers 8x32"),
])
def test_deep_blocks_for_a_large_product(m: int, n: int, blocks: str) -> None:
    """Intel's AVX-512 tiles on two cores, on any host: 12 x 32 register tiles in blocks
    1024 deep x 4 panels when a core's share of C is 1 MB or more (DEEP_C_BYTES), and then
    one block spans K = 1024 and the accumulators start at zero. The same bits as the
    8 x 32 tiles in 256-deep blocks: every element's sum runs in K order either way."""
    p = schedules.replace(schedules.Params.for_target("sapphirerapids"), threads=2)
    shallow = schedules.replace(p, deep=None)
    computation = _matmul(m, 1024, n)
    exe = xm.compile(computation, xm.Pipeline.default().replace("tiled", schedules.scheduler(p)))
    kc = 1024 if "1024 deep" in blocks else 256
    assert f"cache blocks {blocks}" in schedules.last_script()
    assert ("xlamlir.zero_accumulators" in schedules.last_script()) == (kc == 1024)
    reference = xm.compile(computation, xm.Pipeline.default().replace("tiled", schedules.scheduler(shallow)))
    assert "256 deep" in schedules.last_script()
    x, w = _rand((m, 1024), 1), _rand((1024, n), 2)
    x[3, :] = np.nan
    x[5, 7] = np.inf
    w[:, 9] = -0.0
    got = exe(x, w)
    np.testing.assert_array_equal(got.view(np.uint32), reference(x, w).view(np.uint32))
    with np.errstate(invalid="ignore"):
        want = x.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_deep_blocks_count_f64_bytes_and_batch_sharing() -> None:
    p = schedules.replace(schedules.Params.for_target("sapphirerapids"), threads=2)
    mm = _matmul(512, 1024, 512, xm.F64)  # f64 C 2 MB: 1 MB a core
    xm.compile(mm, xm.Pipeline.default().replace("tiled", schedules.scheduler(p)))
    assert "1024 deep" in schedules.last_script()
    xm.compile(_matmul(512, 1024, 512), xm.Pipeline.default().replace("tiled", schedules.scheduler(p)))
    assert "256 deep" in schedules.last_script()  # f32: 512 KB a core
    # Two products of a batch, one a core: each core's C is a whole 512 x 512 f32 product.
    b = xm.XlaBuilder("bmm")
    b.dot_general(b.parameter(0, xm.Shape.array(xm.F32, (2, 512, 1024))),
                  b.parameter(1, xm.Shape.array(xm.F32, (2, 1024, 512))),
                  xm.DotDimensionNumbers((2,), (1,), (0,), (0,)))
    xm.compile(b.build(), xm.Pipeline.default().replace("tiled", schedules.scheduler(p)))
    assert "1024 deep" in schedules.last_script()


def test_params_for_an_unknown_target_cpu_names_the_known_ones() -> None:
    known = "known: host, native, x86-64-v4, skylake-avx512"
    with pytest.raises(xm.ArgumentError, match=f"unknown target_cpu 'skylake-avx5'; {known}"):
        schedules.Params.for_target("skylake-avx5")


def test_equal_params_give_the_same_scheduler_pass() -> None:
    # The compile cache keys Python passes by id(): a pass per Params value, kept, and
    # not changed by later changes to the Params it was made from.
    p = schedules.Params(threads=1, mr=4, nr=8)
    first = schedules.scheduler(p)
    assert schedules.scheduler(schedules.Params(threads=1, mr=4, nr=8)) is first
    assert schedules.scheduler(schedules.Params(threads=1, mr=4, nr=16)) is not first
    p.nr = 16
    exe = xm.compile(_matmul(96, 128, 40), xm.Pipeline.default().replace("tiled", first))
    assert "vector<4x8xf32>" in exe.stages["tiled"] or "vector<4x1x8xf32>" in exe.stages["tiled"]


# -- numerics ------------------------------------------------------------------------------------

@all_tiles
@pytest.mark.parametrize("m, k, n", [
    (64, 64, 64), (100, 70, 48), (7, 300, 160), (130, 257, 32), (6, 1000, 64), (255, 33, 96),
    (1, 4096, 64), (513, 64, 16),
    (65, 133, 70), (97, 129, 33), (50, 301, 24),  # N not a multiple of NR, odd M and K
])
def test_matmul_matches_numpy(m: int, k: int, n: int, p: schedules.Params) -> None:
    exe = _compile(_matmul(m, k, n), p)
    assert _scheduled(exe)
    lhs, rhs = _rand((m, k), 0), _rand((k, n), 1)
    expected = lhs.astype(np.float64) @ rhs.astype(np.float64)
    np.testing.assert_allclose(exe(lhs, rhs), expected, rtol=1e-4, atol=2e-5 * np.sqrt(k) * 10)


@all_tiles
@pytest.mark.parametrize("m, k, n", [(256, 128, 64), (37, 256, 48), (7, 1200, 32), (45, 99, 70)])
def test_dense_relu_matches_numpy(m: int, k: int, n: int, p: schedules.Params) -> None:
    exe = _compile(_dense_relu(m, k, n), p)
    assert _scheduled(exe)
    x, w, bias = _rand((m, k), 0), _rand((k, n), 1), _rand((n,), 2)
    expected = np.maximum(x.astype(np.float64) @ w + bias, 0)
    np.testing.assert_allclose(exe(x, w, bias), expected, rtol=1e-4, atol=1e-3)


def test_default_pipeline_schedules_any_column_count() -> None:
    # With the host's tile, whichever it is: 48 columns are not a multiple of 32 (AVX-512).
    exe = xm.compile(_matmul(100, 70, 48))
    assert _scheduled(exe)
    lhs, rhs = _rand((100, 70), 0), _rand((70, 48), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)


@tiles
def test_epilogues_with_row_broadcasts_scalars_and_matrices(p: schedules.Params) -> None:
    m, k, n = 50, 200, 72  # 72 columns: the epilogue's operands are sliced per part too
    b = xm.XlaBuilder("epi")
    x = b.parameter(0, xm.Shape.array(xm.F32, (m, k)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (k, n)))
    row = b.parameter(2, xm.Shape.array(xm.F32, (m,)))
    other = b.parameter(3, xm.Shape.array(xm.F32, (m, n)))
    y = b.mul(b.dot(x, w), b.broadcast_in_dim(row, (m, n), (0,)))
    y = b.add(b.sub(y, other), b.broadcast(b.constant(np.float32(2)), (m, n)))
    exe = _compile(b.build(), p)
    assert _scheduled(exe) and "arith.subf" in exe.stages["tiled"].split("scf.forall (")[-1]
    args = [_rand((m, k), 0), _rand((k, n), 1), _rand((m,), 2), _rand((m, n), 3)]
    expected = (args[0].astype(np.float64) @ args[1]) * args[2][:, None] - args[3] + 2
    np.testing.assert_allclose(exe(*args), expected, rtol=1e-4, atol=1e-3)


def test_product_used_twice_is_not_fused_and_stays_correct() -> None:
    m, k, n = 64, 64, 64
    b = xm.XlaBuilder("twice")
    p = b.dot(b.parameter(0, xm.Shape.array(xm.F32, (m, k))), b.parameter(1, xm.Shape.array(xm.F32, (k, n))))
    b.tuple([b.add(p, p), b.neg(p), p])
    exe = xm.compile(b.build())
    lhs, rhs = _rand((m, k), 0), _rand((k, n), 1)
    want = lhs.astype(np.float64) @ rhs
    got = exe(lhs, rhs)
    for g, e in zip(got, [2 * want, -want, want], strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("m, k, n, dtype", [
    (64, 64, 64, xm.S32),  # other types (f64 is scheduled too: test_f64_matmul.py)
    (8, 8, 16, xm.F32), (64, 64, 40, xm.F32),  # too small to be worth it
])
def test_unscheduled_matmuls_keep_the_old_path(m: int, k: int, n: int, dtype: xm.PrimitiveType) -> None:
    exe = xm.compile(_matmul(m, k, n, dtype))
    assert not _scheduled(exe)
    np_type = {xm.F32: np.float32, xm.F64: np.float64, xm.S32: np.int32, xm.F16: np.float16}[dtype]
    lhs = np.random.default_rng(0).integers(-3, 4, (m, k)).astype(np_type)
    rhs = np.random.default_rng(1).integers(-3, 4, (k, n)).astype(np_type)
    np.testing.assert_allclose(exe(lhs, rhs).astype(np.float64), lhs.astype(np.float64) @ rhs, rtol=1e-2)


def test_f16_matmul_accumulates_in_the_scheduled_f32_product() -> None:
    # f16 operands are converted to f32 (the accumulation type), the f32 product is
    # scheduled, the rounding to f16 stays a separate consumer (not an in-place epilogue).
    exe = xm.compile(_matmul(64, 128, 64, xm.F16))
    assert _scheduled(exe)
    lhs, rhs = _rand((64, 128), 0).astype(np.float16), _rand((128, 64), 1).astype(np.float16)
    expected = (lhs.astype(np.float64) @ rhs.astype(np.float64)).astype(np.float16)
    np.testing.assert_allclose(exe(lhs, rhs).astype(np.float64), expected.astype(np.float64),
                               rtol=2e-3, atol=2e-2)


@all_tiles
@pytest.mark.parametrize("batch, hw, c, f, padding", [
    (1, 56, 64, 64, "SAME"), (2, 30, 3, 16, "SAME"), (3, 7, 16, 32, "VALID"), (1, 20, 8, 48, "SAME"),
    (3, 20, 16, 32, "SAME"),  # odd batch: cores split the rows, the padding's copy by rows
    (2, 20, 16, 8, "SAME"), (1, 14, 8, 33, "SAME"), (1, 16, 8, 24, "VALID"),  # narrow F tiles
])
def test_conv_matches_numpy(batch: int, hw: int, c: int, f: int, padding: str, p: schedules.Params) -> None:
    exe = _compile(_conv(batch, hw, c, f, padding), p)
    assert _scheduled(exe)
    x, k = _rand((batch, hw, hw, c), 0), _rand((3, 3, c, f), 1)
    expected = _numpy_conv(x.astype(np.float64), k.astype(np.float64), padding)
    np.testing.assert_allclose(exe(x, k), expected, rtol=1e-4, atol=1e-3)


def test_small_conv_keeps_the_old_path() -> None:
    exe = xm.compile(_conv(1, 12, 8, 24))
    assert not _scheduled(exe)
    x, k = _rand((1, 12, 12, 8), 0), _rand((3, 3, 8, 24), 1)
    np.testing.assert_allclose(exe(x, k), _numpy_conv(x, k, "SAME"), rtol=1e-4, atol=1e-3)


def test_matmul_inside_a_while_loop_is_scheduled() -> None:
    n = 64
    b = xm.XlaBuilder("loop")
    x = b.parameter(0, xm.Shape.array(xm.F32, (n, n)))
    w = b.parameter(1, xm.Shape.array(xm.F32, (n, n)))

    def cond(t: xm.XlaOp) -> xm.XlaOp:
        return t.builder.lt(t.builder.get_tuple_element(t, 0), t.builder.constant(np.int32(3)))

    def body(t: xm.XlaOp) -> xm.XlaOp:
        bb = t.builder
        i, v, ww = (bb.get_tuple_element(t, j) for j in range(3))
        return bb.tuple([bb.add(i, bb.constant(np.int32(1))), bb.tanh(bb.dot(v, ww)), ww])

    b.get_tuple_element(b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x, w])), 1)
    exe = xm.compile(b.build())
    assert _scheduled(exe)
    xv, wv = _rand((n, n), 0) / 8, _rand((n, n), 1) / 8
    expected = xv.astype(np.float64)
    for _ in range(3):
        expected = np.tanh(expected @ wv)
    np.testing.assert_allclose(exe(xv, wv), expected, rtol=1e-4, atol=1e-5)


@tiles
@pytest.mark.parametrize("n", [96, 70])
@pytest.mark.parametrize("lhs_contracting, rhs_contracting", [(1, 1), (0, 0), (0, 1)])
def test_transposed_operands_are_scheduled(lhs_contracting: int, rhs_contracting: int, n: int,
                                           p: schedules.Params) -> None:
    # x @ w.T (rhs stored [n, k]) and lhs stored [k, m]: dot_general lowers these to a
    # linalg.generic reading the operands in place; the schedule packs B from either layout
    # (the narrow panel of N = 70 from rows of B stored [n, k]).
    m, k = 130, 200
    lhs_shape = (m, k) if lhs_contracting == 1 else (k, m)
    rhs_shape = (k, n) if rhs_contracting == 0 else (n, k)
    b = xm.XlaBuilder("transposed")
    b.dot_general(b.parameter(0, xm.Shape.array(xm.F32, lhs_shape)),
                  b.parameter(1, xm.Shape.array(xm.F32, rhs_shape)),
                  (((lhs_contracting,), (rhs_contracting,)), ((), ())))
    exe = _compile(b.build(), p)
    assert _scheduled(exe)
    lhs, rhs = _rand(lhs_shape, 0), _rand(rhs_shape, 1)
    a = lhs if lhs_contracting == 1 else lhs.T
    w = rhs if rhs_contracting == 0 else rhs.T
    np.testing.assert_allclose(exe(lhs, rhs), a.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)


def test_a_scheduler_with_other_parameters_replaces_the_stage() -> None:
    p = xm.Pipeline.default().replace("tiled", schedules.scheduler(schedules.Params(threads=1, mr=4, nr=8)))
    exe = xm.compile(_matmul(96, 128, 40), p)  # 40 columns: five 8-wide panels
    tiled = exe.stages["tiled"]
    assert "vector<4x8xf32>" in tiled or "vector<4x1x8xf32>" in tiled
    assert set(re.findall(r"scf\.forall \(%\w+\) in \((\d+)\)", tiled)) <= {"1"}  # one thread
    lhs, rhs = _rand((96, 128), 0), _rand((128, 40), 1)
    np.testing.assert_allclose(exe(lhs, rhs), lhs.astype(np.float64) @ rhs, rtol=1e-4, atol=1e-3)
