"""Schedules for matmuls and convolutions: packing, tiling, vectorization, multi-core.

The "tiled" stage (after "fused", on tensors) runs `schedule_contractions`. For
each op it can make fast (f32 or f64 matmuls, f32 convolutions, static shapes, large
enough; see `_matmul_plan` and `_conv_plan`) it rewrites the op into a packed form in Python, then builds
a transform-dialect script and applies it with the transform interpreter. The
"tiled" stage shows the result; `last_script()` returns the script of the last
compile, and `scheduler(Params(...))` makes a stage pass with other tile sizes
(`Pipeline.replace("tiled", ...)`). Everything else is left to the later stages.

Matmul C[M,N] = A[M,K] B[K,N] (`linalg.matmul`, or the linalg.generic that
dot_general makes of transposed operands: A stored [K, M], B stored [N, K]):
  1. B is packed into NR-wide column panels, Bp[N/NR, K, NR] (a `linalg.transpose`
     of B viewed as [K, N/NR, NR] or [N/NR, NR, K]; every panel is then contiguous), and the product
     becomes a linalg.generic over (n1, m, n0, k) writing C viewed as [M, N/NR, NR]
     (an expand_shape: the same memory). A is read in place.
  2. An elementwise consumer of the product (bias add, relu...) is rewritten in
     the same [M, N/NR, NR] view and becomes the root: `tile_using_forall` splits
     it by rows across the cores, the contraction and its zero fill are fused into
     each thread's tile (`fuse_into_containing_op`), and the epilogue runs on that
     thread's block of C while it is still in cache.
  3. Cache tiling [NC panels, MC rows, KC] in the order (n1, k, m) (BLIS: a KC x NC
     block of Bp stays in L2, each NR panel of it in L1 across the rows; Params' deep
     blocks where C is large: fewer passes over C, which no longer stays in L2). When the
     cores split the columns (N/NR panels divide evenly, or nearly: 31 = 16 + 15; KC
     divides K), B is packed
     a block at a time inside that loop nest (the transpose fused into the k-block
     loop: each core packs only its panels, hot in L2 when used); else rows are split
     and B is packed up front by its own parallel loop. Then
     register tiling [1 panel, MR rows, 1 k]: the MR x NR accumulator tile is held
     in MR * NR / lanes vector registers (6 x 16 f32 = 12 ymm with AVX2, 8 x 32 =
     16 zmm with AVX-512, 12 x 32 = 24 zmm on Intel's for a large C; 16 / 32
     registers in all).
  4. The remainder row tile is peeled (`loop.peel`) so that every tile is static,
     then vectorized: the k step is an outer product MR x NR, lowered to MR
     broadcasts and `vector.fma`s (the rows put back into the tile one
     `insert_strided_slice` each: `register_tiles.py`); the accumulator's read/write are hoisted out of
     the k loop (`hoist_loop_invariant_subsets`), so it stays in registers. When one KC block
     spans K (and no epilogue is fused), the tiles start from zero in registers and C is not
     zero-filled first (`zero_accumulators.py`).
  5. scf.forall becomes tasks on the async runtime's thread pool from the "loops" stage on
     (lowering/passes/parallel_tasks.py).
When N is not a multiple of NR, the columns past the last whole panel are a second
part, scheduled the same way with one panel of their own width (`_column_parts`: an
MR x (N mod NR) register tile on shorter vectors; its packing a plain loop): each part
reads its slice of B and of the epilogue's operands and writes its columns of C in
place (extract_slice / insert_slice of the destination, no copy), so no zero padding
is computed and no padded temporary copied back. Costs one more parallel loop.

Batched matmuls C[b.., M, N] = A[b.., M, K] B[b.., K, N] (`linalg.batch_matmul`, or the
generic of dot_general with batch dimensions leading in every operand, either operand
transposed: attention's Q K^T and P V) are the same kernel inside a batch loop. Several
batch dimensions are collapsed into one (a view), the loops are (b, n1, m, n0, k), and
the parallel loop takes a run of batch elements per core, each computed as one thread's
2-D product (B packed a KC block at a time inside it); with fewer elements than cores,
one element per tile and the rest of the cores split each product as above
(`_batch_split`). No epilogue is fused into a batched product.

Convolution `linalg.conv_2d_nhwc_hwcf` (any strides and dilations; the lowering has
padded the input already): split across cores by batch (or rows), tiled to one
output row x OWR pixels x F-tile of NR channels x one kernel tap x one input
channel, decomposed into 1-D convolutions (`transform.structured.decompose`) and
vectorized: each step is again an outer product (OWR input pixels x F-tile kernel
row), accumulated in registers over the 3 x 3 x C reduction. No im2col copy. The
last F-tile (F mod NR channels) and the last OWR-pixel tile are peeled, so they are
static too and vectorize on shorter vectors.

f64 matmuls take the same schedule with register tiles half as wide in elements (8 x 16
with AVX-512, 6 x 8 else: the same vector registers, panels of the same bytes;
`_for_element`). Before, they took the generic path: 38 ms for 512^3 (numpy 1.8), now 1.9.

The tiles: `Params.for_target(cpu)` (8 x 32 with AVX-512, 6 x 16 else; "host" reads
/proc/cpuinfo, which is what the default pipeline uses, `PARAMS`). Any MR and NR work,
for any N and F. Anything else (other types, dynamic or small shapes, batch dimensions
that do not lead, other conv layouts) keeps the generic path. A matmul that the "fused"
stage split into several M, N, K or batch loops around a reshape (an MLP's flatten) is
first rebuilt with one loop each (split_contractions.py), so it is scheduled too.
Imports `dialect`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace
from typing import Any

from mlir import ir
from mlir.dialects import arith, bufferization, linalg, tensor
from mlir.dialects.transform import interpreter

from ...dialect.errors import ArgumentError
from ..pass_managers import own_pass
from .generic_attrs import all_parallel, indexing_maps, iterator_kinds
from .lane_schedules import schedule_lanes
from .register_tiles import rows_as_slices
from .split_contractions import collapse_split_contractions
from .zero_accumulators import MARK as ZERO_MARK
from .zero_accumulators import start_accumulators_at_zero

TAG = "xlamlir.schedule"  # marks the ops a script handles, by index
ANY = "!transform.any_op"
DEEP_C_BYTES = 1 << 20  # a core's share of C from which `Params.deep` applies
MIN_FLOPS = 2 * 64**3  # below this the packing and loop overheads are not worth it
STRICT = False  # raise when a schedule fails instead of falling back (tests set it)

_last_script: list[str] = [""]


def last_script() -> str:
    """The transform script the last compile applied (empty if none)."""
    return _last_script[0]


def _cpuinfo_line(field: str) -> str:
    """The first line of /proc/cpuinfo starting with `field` ("" if none or unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.strip()
    except OSError:
        pass
    return ""


def _host_has_avx512() -> bool:
    return " avx512f " in f" {_cpuinfo_line('flags')} "


def _host_is_intel() -> bool:
    return "GenuineIntel" in _cpuinfo_line("vendor_id")


# LLVM's x86 CPU names (`llc -mcpu=help`, LLVM 21) by whether LLVM gives them 512-bit
# registers (found by compiling a <16 x float> add for each and looking for zmm); "host"
# reads /proc/cpuinfo instead. AMD's Zen 4 runs AVX-512 on 256-bit units, but a zmm
# FMA still does the work of two ymm ones per instruction, so it takes the wide tile.
AVX512_CPUS = tuple("""
    x86-64-v4 skylake-avx512 skylake_avx512 skx cascadelake cooperlake cannonlake icelake-client
    icelake_client icelake-server icelake_server tigerlake rocketlake sapphirerapids emeraldrapids
    graniterapids graniterapids-d graniterapids_d diamondrapids novalake knl knm mic_avx512
    znver4 znver5""".split())
# AMD's and the generic one (the rest are Intel's): their KC block spans 1024 deep.
AVX512_1024_DEEP = ("x86-64-v4", "znver4", "znver5")
# The rest: AVX2/AVX (16-wide vectors in two ymm), and SSE-only ones (LLVM splits them
# into four xmm: correct, not tuned).
OTHER_CPUS = tuple("""
    x86-64-v3 x86-64-v2 x86-64 generic haswell broadwell skylake alderlake raptorlake meteorlake
    arrowlake arrowlake-s arrowlake_s lunarlake pantherlake wildcatlake gracemont sierraforest
    grandridge clearwaterforest sandybridge ivybridge core-avx-i core-avx2 corei7-avx
    core_2nd_gen_avx core_3rd_gen_avx core_4th_gen_avx core_4th_gen_avx_tsx core_5th_gen_avx
    core_5th_gen_avx_tsx znver1 znver2 znver3 bdver1 bdver2 bdver3 bdver4 btver1 btver2
    amdfam10 barcelona nehalem westmere corei7 core_i7_sse4_2 core_aes_pclmulqdq core2
    core_2_duo_sse4_1 core_2_duo_ssse3 penryn nocona prescott yonah atom atom_sse4_2
    atom_sse4_2_movbe bonnell silvermont slm goldmont goldmont-plus goldmont_plus tremont
    k8 k8-sse3 opteron opteron-sse3 athlon64 athlon64-sse3 athlon-fx""".split())


@dataclass(frozen=True)
class DeepBlocks:
    """The tiles of a product whose C, per core, does not stay in L2 across the K blocks
    (DEEP_C_BYTES or more): fewer, deeper K blocks (fewer passes over C), and the taller
    register tile that deep B panels (out of L1) want: each panel row loaded from L2 once
    per `mr` rows of A."""

    mr: int
    mc: int
    nc: int
    kc: int


@dataclass
class Params:
    """Tile sizes. `mr` x `nr` is the register tile (nr = two vector registers); any
    nr works (N and F need not be multiples of it: the rest is a narrower panel)."""

    threads: int
    mr: int
    nr: int
    mc: int = 64  # rows of A per cache block
    nc: int = 16  # Bp panels per cache block (16 x 16 floats = 256 columns)
    kc: int = 256  # depth of a cache block
    deep: DeepBlocks | None = None  # None: the same tiles for every size

    @classmethod
    def for_target(cls, target_cpu: str = "host") -> Params:
        """The tiles for an LLVM CPU name: 8 x 32 (16 zmm accumulators, cache blocks of
        8 panels x 1024 deep on AMD's and x86-64-v4, 256 deep on Intel's, and there 12 x 32
        in 4 x 1024 blocks for a C of 1 MB or more a core: `_for_size`) where it has
        AVX-512 (`AVX512_CPUS`), else 6 x 16 (12 ymm
        with AVX2, blocks of 16 panels x 1024 deep; `OTHER_CPUS`). "host"
        (or "native") reads /proc/cpuinfo. Threads: the cores this process may run on.
        A name in neither list raises ArgumentError (naming the known ones)."""
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        name = target_cpu.strip().lower() if isinstance(target_cpu, str) else target_cpu
        if name in ("host", "native"):
            wide = _host_has_avx512()
            deep = not _host_is_intel()
        elif name in AVX512_CPUS or name in OTHER_CPUS:
            wide = name in AVX512_CPUS
            deep = name in AVX512_1024_DEEP
        else:
            raise ArgumentError(f"unknown target_cpu {target_cpu!r}; known: host, native, "
                                + ", ".join(AVX512_CPUS + OTHER_CPUS))
        if wide:
            # 16 zmm accumulators of 32, 8 panels a block keeping B's block in L2. AMD:
            # one KC block spans up to 1024 deep: measured on Zen 5 (48 KB L1, 1 MB L2), a
            # 1024^3 product took 8-11% less CPU time than with 256-deep blocks (each
            # tile's accumulators loaded and stored once, and started at zero:
            # zero_accumulators.py). Intel: 256 deep: measured on a Xeon with AVX-512
            # (48 KB L1, 2 MB L2; 2 cores, interleaved), relu(x@W+b) 256x1024x1024 1.98
            # -> 1.81 ms, 128x1024x1024 -14%, 256x2048x2048 -10%, 512 rows or more and
            # 1024^3 the same (within 2%), convolutions unaffected.
            # Intel's, for a C of 1 MB or more a core: 1024 deep too, 4 panels a block
            # (B's block 512 KB): each pass of the K blocks over C went to L3 for it.
            # Measured here (interleaved, one process): 1024^3 7.13-7.40 -> 6.61-6.88 ms,
            # 2048^3 55.6 -> 52.4, 1024x1024 @ 1024x1024 + relu 7.10 -> 6.84, 512 rows x
            # 1024 x 1024 3.52 -> 3.44; with 256 rows (C 512 KB a core) 1.70 -> 1.78 and
            # with 128 1.04 -> 1.14, so those keep the 256-deep blocks. A 1024-deep panel
            # of B (128 KB) is out of L1: 12 x 32 register tiles (24 zmm accumulators)
            # load it from L2 once per 12 rows: 1024^3 6.78-6.84 -> 6.42-6.60 ms, with
            # relu 7.08 -> 6.87, 2048^3 and f64 1024^3 the same.
            intel = None if deep else DeepBlocks(mr=12, mc=96, nc=4, kc=1024)
            return cls(threads=threads, mr=8, nr=32, nc=8, kc=1024 if deep else 256, deep=intel)
        # 12 ymm accumulators of 16. KC up to 1024 deep here too: measured on Zen 3 (32 KB
        # L1, 512 KB L2, AVX2), interleaved runs, against 256 deep: 512^3 -18%, 1024^3 -12%,
        # relu(x@W+b) 256x1024x1024 -23% (one block spans K: accumulators start at zero
        # in registers, stored once); a 2048-deep product, convolutions and batched
        # products within 3% (noise). Same bits: the K order of the sums does not change.
        return cls(threads=threads, mr=6, nr=16, kc=1024)

    @classmethod
    def for_host(cls) -> Params:
        return cls.for_target("host")


PARAMS = Params.for_host()


def _static_float(value: ir.Value, element: type) -> bool:
    t = value.type
    return (isinstance(t, ir.RankedTensorType) and t.has_static_shape
            and isinstance(t.element_type, element))


def _matmul_element(mm: Any) -> type | None:
    """F32Type or F64Type if every operand of `mm` is a static tensor of it, else None."""
    for element in (ir.F32Type, ir.F64Type):
        if all(_static_float(v, element) for v in mm.operands):
            return element
    return None


def _for_element(p: Params, mm: Any) -> Params:
    """`p` for `mm`'s element type: f64 tiles are half as wide in elements (the same
    vector registers: 8 x 16 f64 in 16 zmm, 6 x 8 in 12 ymm), the same bytes per panel."""
    if _matmul_element(mm) is ir.F64Type:
        return replace(p, nr=max(2, p.nr // 2))
    return p


def _for_size(p: Params, mm: Any, m: int, n: int, batch: int) -> Params:
    """`p` with its deep blocks when each core's share of C (one product of a batch a core
    computes alone, or its part of one the cores split) is DEEP_C_BYTES or more."""
    if p.deep is None:
        return p
    sharing = max(1, p.threads // batch) if batch else p.threads
    element_bytes = 8 if _matmul_element(mm) is ir.F64Type else 4
    if m * n * element_bytes < DEEP_C_BYTES * sharing:
        return p
    return replace(p, mr=p.deep.mr, mc=p.deep.mc, nc=p.deep.nc, kc=p.deep.kc)


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _i64(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _result(built: Any) -> ir.Value:
    return built if isinstance(built, ir.Value) else built.results[0]


def _divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def _thread_split(extent: int, threads: int, minimum: int) -> int:
    """How many threads share `extent` rows: a divisor count, each part >= minimum."""
    for t in range(threads, 1, -1):
        if extent % t == 0 and extent // t >= minimum:
            return t
    return 1


# -- matmul ------------------------------------------------------------------------------------------

def _single_use(value: ir.Value) -> Any | None:
    uses = list(value.uses)
    return uses[0].owner if len(uses) == 1 else None


def _epilogue(mm: Any) -> Any | None:
    """The elementwise consumer to fuse: a parallel 2-D generic with identity output map,
    inputs read through projected permutations, no linalg.index, sole user of mm."""
    ep = _single_use(mm.results[0])
    if ep is None or ep.name != "linalg.generic" or len(ep.results) != 1:
        return None
    ep = ep.opview if hasattr(ep, "opview") else ep
    maps = indexing_maps(ep)
    if not all_parallel(ep):
        return None
    # Same type: the epilogue updates the product in place (a convert to f16 does not).
    if ep.results[0].type != mm.results[0].type or maps[-1] != ir.AffineMap.get_identity(2):
        return None
    for m in maps:
        if m.n_dims != 2 or not m.is_projected_permutation or \
                any(str(r) not in ("d0", "d1") for r in m.results) or \
                [str(r) for r in m.results] not in ([], ["d0"], ["d1"], ["d0", "d1"]):
            return None
    found = []
    ep.operation.walk(lambda o: (found.append(o) if o.name == "linalg.index" else None,
                                 ir.WalkResult.ADVANCE)[1])
    if found:
        return None
    # The product must be an input read in place (identity), not the init.
    n_in = len(ep.operands) - 1
    if not any(ep.operands[i] == mm.results[0] and maps[i] == ir.AffineMap.get_identity(2)
               for i in range(n_in)):
        return None
    return ep


def _maps(op: Any) -> list[str]:
    return [str(m) for m in indexing_maps(op)]


def _matmul_layout(op: Any) -> tuple[bool, bool, int] | None:
    """(A transposed, B transposed, batch dims) of C[b.., m, n] += A[b.., m, k] B[b.., k, n]
    with A stored [b.., m, k] or [b.., k, m] and B [b.., k, n] or [b.., n, k], the batch
    dimensions leading in every operand: linalg.matmul, linalg.batch_matmul, or the generic
    dot_general lowers other layouts to (lowering/ops/dot.py); None for anything else."""
    if op.name in ("linalg.matmul", "linalg.batch_matmul"):
        return None if "indexing_maps" in op.attributes else (False, False, int(op.name != "linalg.matmul"))
    if op.name != "linalg.generic" or len(op.operands) != 3 or len(op.results) != 1:
        return None
    kinds = iterator_kinds(op)
    nb = len(kinds) - 3
    if nb < 0 or kinds != ["parallel"] * (nb + 2) + ["reduction"]:
        return None
    dims = [f"d{i}" for i in range(nb + 3)]
    batch, (m, n, k) = dims[:nb], dims[nb:]

    def text(*results: str) -> str:
        return f"({', '.join(dims)}) -> ({', '.join(batch + list(results))})"

    a_maps, b_maps = {text(m, k): False, text(k, m): True}, {text(k, n): False, text(n, k): True}
    maps = _maps(op)
    if maps[2] != text(m, n) or maps[0] not in a_maps or maps[1] not in b_maps:
        return None
    body = list(op.regions[0].blocks[0].operations)
    args = list(op.regions[0].blocks[0].arguments)
    if [o.name for o in body] != ["arith.mulf", "arith.addf", "linalg.yield"]:
        return None
    mul, add = body[0], body[1]
    if {mul.operands[0], mul.operands[1]} != {args[0], args[1]} or \
            {add.operands[0], add.operands[1]} != {args[2], mul.results[0]}:
        return None
    return a_maps[maps[0]], b_maps[maps[1]], nb


def _matmul_plan(mm: Any, p: Params) -> tuple[int, int, int, int] | None:
    """(M, N, K, batch) of a matmul the schedule handles (batch: the product of the batch
    dimensions, 0 without any), else None."""
    layout = _matmul_layout(mm)
    if layout is None or _matmul_element(mm) is None:
        return None
    fill = mm.operands[2].owner
    if isinstance(fill, ir.Block) or fill.name != "linalg.fill":
        return None
    a_transposed, _, nb = layout
    *batch_dims, m, n = _shape(mm.operands[2])
    k = _shape(mm.operands[0])[nb if a_transposed else nb + 1]
    batch = 1
    for size in batch_dims:
        batch *= size
    if 2 * batch * m * n * k < MIN_FLOPS or min(m, n, k, batch) == 0:
        return None
    return m, n, k, batch if nb else 0


def _expand_n(value: ir.Value, dims: list[int], at: int, nr: int) -> ir.Value:
    """`value` with dimension `at` (an N of size n) split into [n / nr, nr] (a view)."""
    new = dims[:at] + [dims[at] // nr, nr] + dims[at + 1:]
    reassociation = [[i] for i in range(at)] + [[at, at + 1]] + [[i + 1] for i in range(at + 1, len(dims))]
    element = ir.RankedTensorType(value.type).element_type
    return tensor.expand_shape(ir.RankedTensorType.get(new, element), value, reassociation, [], new)


def _column_parts(n: int, nr: int) -> list[tuple[int, int, int]]:
    """(first column, columns, panel width) of each part of an N-wide product: the whole
    nr-wide panels, then the rest as one narrower panel (its register tile is MR x rest:
    the same code, on shorter vectors)."""
    main = n - n % nr
    return ([(0, main, nr)] if main else []) + ([(main, n - main, n - main)] if n % nr else [])


def _slice(value: ir.Value, at: int, start: int, size: int) -> ir.Value:
    """`value[..., start:start + size, ...]` along dimension `at` (itself if that is all of it)."""
    dims = _shape(value)
    if start == 0 and size == dims[at]:
        return value
    sizes = dims[:at] + [size] + dims[at + 1:]
    offsets = [start if i == at else 0 for i in range(len(dims))]
    result = ir.RankedTensorType.get(sizes, ir.RankedTensorType(value.type).element_type)
    return tensor.extract_slice(result, value, [], [], [], offsets, sizes, [1] * len(dims))


def _insert_columns(part: ir.Value, dest: ir.Value, start: int) -> ir.Value:
    sizes = _shape(part)
    offsets = [0] * (len(sizes) - 1) + [start]
    return tensor.insert_slice(part, dest, [], [], [], offsets, sizes, [1] * len(sizes))


def _collapse_batch(value: ir.Value, nb: int) -> ir.Value:
    """[b1, .., b_nb, x, y] viewed as [b1 * .. * b_nb, x, y] (no copy: the batch dimensions
    lead), so that every batched product is one batch loop around the 2-D kernel."""
    if nb == 1:
        return value
    dims = _shape(value)
    batch = 1
    for size in dims[:nb]:
        batch *= size
    element = ir.RankedTensorType(value.type).element_type
    return tensor.collapse_shape(ir.RankedTensorType.get([batch, *dims[nb:]], element), value,
                                 [list(range(nb)), [nb], [nb + 1]])


def _rewrite_epilogue(ep: Any, product: ir.Value, product3: ir.Value, start: int, nr: int,
                      index: int) -> Any:
    """The 2-D elementwise `ep` (consumed: the caller passes a copy per part) as a 3-D
    generic over (m, n1, n0) on the [M, columns / nr, nr] views of the part of its
    operands from column `start` on, that updates the product in place (its init; the
    product is no input)."""
    maps = indexing_maps(ep)
    columns = _shape(product3)[1] * nr
    n_in = len(ep.operands) - 1
    d0, d1, d2 = (ir.AffineDimExpr.get(i) for i in range(3))
    inputs, new_maps, kept = [], [], []
    for i in range(n_in):
        operand, results = ep.operands[i], [str(r) for r in maps[i].results]
        if operand == product and results == ["d0", "d1"]:
            continue
        kept.append(i)
        if "d1" in results:
            at = results.index("d1")
            inputs.append(_expand_n(_slice(operand, at, start, columns), _shape(operand)[:at] + [columns]
                                    + _shape(operand)[at + 1:], at, nr))
        else:
            inputs.append(operand)
        exprs = []
        for r in results:
            exprs += [d0] if r == "d0" else [d1, d2]
        new_maps.append(ir.AffineMap.get(3, 0, exprs))
    new_maps.append(ir.AffineMap.get(3, 0, [d0, d1, d2]))
    op = linalg.GenericOp_(inputs, [product3], new_maps, ["parallel"] * 3)
    old_block, new_block = ep.regions[0].blocks[0], op.regions[0].blocks[0]
    new_args = list(new_block.arguments)
    for i, old in enumerate(old_block.arguments):
        if i in kept:
            old.replace_all_uses_with(new_args[kept.index(i)])
        else:  # the product, or the (unread) output element: the element being updated
            old.replace_all_uses_with(new_args[-1])
    for inner in list(old_block.operations):
        new_block.append(inner)
    op.operation.attributes[TAG + ".epilogue"] = _i64(index)
    ep.erase()
    return op


def _pack_matmul(mm: Any, first: int, p: Params) -> list[tuple[int, int, int, bool]]:
    """Steps 1 and 2's rewrite of the module docstring, once per column part
    (`_column_parts`): (script index, columns, panel width, epilogue fused) of each part, numbered
    from `first`. The parts are extracted from and inserted back into the destination,
    so they are computed in place. A batched product keeps one leading batch dimension
    (several are collapsed into one) in every operand and in the loops: (b, n1, m, n0, k)."""
    a, b, init = mm.operands[0], mm.operands[1], mm.operands[2]
    a_transposed, b_transposed, nb = _matmul_layout(mm) or (False, False, 0)
    fill = init.owner
    *batch_dims, m, n = _shape(init)
    element = ir.RankedTensorType(init.type).element_type  # f32 or f64
    ep = None if nb else _epilogue(mm)
    parts = _column_parts(n, p.nr)
    done: list[tuple[int, int, int, bool]] = []
    with ir.InsertionPoint(ep if ep is not None else mm), mm.location:
        # The product is computed in its consumer's destination (in place: the epilogue
        # reads each element once, where it writes it), else in the fill's.
        dest = ep.operands[len(ep.operands) - 1] if ep is not None else fill.operands[1]
        if len(parts) > 1 and not isinstance(dest.owner, ir.Block) and dest.owner.name == "tensor.empty":
            # Our own, used by the parts only: `_write_into_outputs` may make it the output.
            dest = tensor.EmptyOp([*batch_dims, m, n], element).result
            dest.owner.attributes[TAG + ".dest"] = _i64(first)
        if nb:
            a, b, dest = (_collapse_batch(v, nb) for v in (a, b, dest))
        lead = [_shape(dest)[0]] if nb else []  # the batch dimension, if any
        o = len(lead)
        k = _shape(a)[o if a_transposed else o + 1]
        for index, (start, columns, nr) in enumerate(parts, first):
            if b_transposed:  # B stored [n, k]: [n1, nr, k] -> [n1, k, nr]
                b3 = _expand_n(_slice(b, o, start, columns), [*lead, columns, k], o, nr)
                permutation = [0] * o + [o, o + 2, o + 1]
            else:  # B stored [k, n]: [k, n1, nr] -> [n1, k, nr]
                b3 = _expand_n(_slice(b, o + 1, start, columns), [*lead, k, columns], o + 1, nr)
                permutation = [0] * o + [o + 1, o, o + 2]
            packed = tensor.EmptyOp([*lead, columns // nr, k, nr], element).result
            bp = _result(linalg.transpose(b3, outs=[packed], permutation=permutation))
            bp.owner.attributes[TAG + ".pack"] = _i64(index)
            c3 = _result(linalg.fill(fill.operands[0], outs=[
                _expand_n(_slice(dest, o + 1, start, columns), [*lead, m, columns], o + 1, nr)]))
            d = [ir.AffineDimExpr.get(i) for i in range(4 + o)]
            bd, (n1, mi, n0, ki) = d[:o], d[o:]
            # Loops (b, n1, m, n0, k): the unit n1 tile leads, so a register tile's vector
            # contraction drops it and lowers to outer products (MR broadcasts + fmas).
            a_map = [ki, mi] if a_transposed else [mi, ki]
            maps = [ir.AffineMap.get(4 + o, 0, bd + a_map), ir.AffineMap.get(4 + o, 0, bd + [n1, ki, n0]),
                    ir.AffineMap.get(4 + o, 0, bd + [mi, n1, n0])]
            op = linalg.GenericOp_([a, bp], [c3], maps, ["parallel"] * (3 + o) + ["reduction"])
            with ir.InsertionPoint(op.regions[0].blocks[0]):
                x, y, acc = op.regions[0].blocks[0].arguments
                linalg.YieldOp([arith.addf(acc, arith.mulf(x, y))])
            op.operation.attributes[TAG] = _i64(index)
            part = op.results[0]
            if ep is not None:
                copy = ep.operation.clone()
                part = _rewrite_epilogue(copy, mm.results[0], part, start, nr, index).results[0]
            reassociation = [[i] for i in range(o + 1)] + [[o + 1, o + 2]]
            part = tensor.collapse_shape(ir.RankedTensorType.get([*lead, m, columns], element), part,
                                         reassociation)
            dest = part if len(parts) == 1 else _insert_columns(part, dest, start)
            done.append((index, columns, nr, ep is not None))
        if nb > 1:
            dest = tensor.expand_shape(ir.RankedTensorType.get([*batch_dims, m, n], element), dest,
                                       [list(range(nb)), [nb], [nb + 1]], [], [*batch_dims, m, n])
    (ep if ep is not None else mm).results[0].replace_all_uses_with(dest)
    if ep is not None:
        ep.erase()
    mm.erase()
    if not list(fill.results[0].uses):
        fill.erase()
    return done


# Script lines. Each helper returns one transform op; handles are named by the caller.

def _match(out: str, op: str, attr: str, i: int, within: str = "%root") -> str:
    return (f'{out} = transform.structured.match ops{{["{op}"]}} attributes {{{attr} = {i} : i64}} '
            f"in {within} : ({ANY}) -> {ANY}")


def _tile_for(out: str, loops: str, target: str, sizes: list[int],
              interchange: list[int] | None = None) -> str:
    n = sum(1 for size in sizes if size)
    inter = f" interchange = {interchange}" if interchange else ""
    return (f"{out}, {loops}:{n} = transform.structured.tile_using_for {target} tile_sizes {sizes}{inter}"
            f" : ({ANY}) -> ({', '.join([ANY] * (n + 1))})")


def _tile_forall(out: str, forall: str, target: str, how: str) -> str:
    return (f"{out}, {forall} = transform.structured.tile_using_forall {target} {how}"
            f" : ({ANY}) -> ({ANY}, {ANY})")


def _fuse(out: str, forall: str, producer: str, into: str) -> str:
    return (f"{out}, {forall} = transform.structured.fuse_into_containing_op {producer} into {into}"
            f" : ({ANY}, {ANY}) -> ({ANY}, {ANY})")


def _peel(loop: str, name: str) -> str:
    """Peel the partial last iteration of `loop` (a handle): the full tiles get static
    sizes and the remainder tile too (the enclosing tile is static)."""
    return "\n".join([
        f'%{name} = transform.cast {loop} : {ANY} to !transform.op<"scf.for">',
        f"%{name}_main, %{name}_rest = transform.loop.peel %{name}"
        f' : (!transform.op<"scf.for">) -> ({ANY}, {ANY})'])


_CANONICALIZE_LOOPS = """transform.apply_patterns to {h} {{
      transform.apply_patterns.scf.for_loop_canonicalization
      transform.apply_patterns.canonicalization
    }} : !transform.any_op"""


def _lines(*lines: str) -> str:
    return "".join(f"\n    {line}" for line in lines if line)


def _batch_split(p: Params, batch: int) -> tuple[int, Params]:
    """(batch elements per parallel tile, the Params of the 2-D kernel inside it). Enough
    batch elements for every core: each core takes a run of them and computes each alone
    (one thread's 2-D kernel: B packed a block at a time where it is used). Fewer: one
    per tile, and the cores left over split each product as a 2-D one does."""
    if batch >= p.threads:
        return -(-batch // p.threads), replace(p, threads=1)
    return 1, replace(p, threads=max(1, p.threads // batch))


def _matmul_script(i: int, p: Params, shape: tuple[int, int, int], epilogue: bool, batch: int = 0) -> str:
    m, n, k = shape
    bt = 0
    if batch:
        bt, p = _batch_split(p, batch)
    o = 1 if batch else 0  # the leading batch loop
    z = [1] * o  # its register- and pack-level tile: one batch element
    t_m, t_n1 = m, n // p.nr
    # Cores take column panels when they divide (nearly) evenly: each then packs just its
    # own panels, a cache block at a time, right where the block is used (hot in L2), with
    # no second parallel loop. Else rows, with B packed by its own parallel loop first
    # (measured at N = 992, 31 panels: 25-40% more CPU time than the column split).
    threads = _thread_split(t_n1, p.threads, 1)
    per_core = t_n1 // threads
    if threads == 1 and 8 * (-t_n1 % p.threads) <= t_n1:
        # Nearly even: the last core takes fewer panels (31 = 16 + 15), waiting < 1/8.
        threads, per_core = p.threads, -(-t_n1 // p.threads)
    # Packing per block needs whole KC blocks (static shapes): KC dividing K.
    kc = _divisor_at_most(k, p.kc)
    fused_pack = (threads > 1 or p.threads == 1) and (kc == k or kc >= p.kc // 4)
    if not fused_pack:
        kc = p.kc
    if fused_pack:
        t_n1 = per_core
    else:
        threads = _thread_split(m, p.threads, 2 * p.mr)
        t_m //= threads
    mc = _divisor_at_most(t_m, p.mc)
    if mc < 4 * p.mr:  # no useful divisor: one row block, the register loop is peeled
        mc = t_m
    # Rows of B copied per vector step of the packing: whole tiles in every KC block.
    k_pack = _divisor_at_most(kc if fused_pack else k, 8)
    # The packing inside the parallel loop is vectorized with the kernel, before its vector
    # lowering, except one row per step (k_pack = 1: no divisor of KC up to 8, as K = 37).
    # That step moves a [1, 1, NR] slice of B to a [1, 1, NR] slice of Bp: the lowering's
    # transfer_permutation_patterns make its transposing read a plain one, the folder
    # then turns read + write into B's slice itself, inserted into Bp, and bufferization
    # makes that a memref.copy per row. Vectorized after the lowering, it stays a vector
    # read and write (as the packing in its own loop, which the lowering does not reach).
    # Longer steps keep their place: a [k_pack, 1, NR] slice read into [1, k_pack, NR]
    # does not fold, and the lowering makes their transposes vector.transpose.
    pack_sizes = z + [1, k_pack, p.nr] if fused_pack else [1, 1, k_pack, p.nr]
    pack_vectors = (f"transform.structured.vectorize %pkt2_{i} vector_sizes {pack_sizes} : {ANY}"
                    if fused_pack or batch else "")
    early_pack_vectors, late_pack_vectors = ("", pack_vectors) if k_pack == 1 else (pack_vectors, "")
    if epilogue:  # the epilogue is the root; the product and its fill are fused into it
        root = [
            _match(f"%ep{i}", "linalg.generic", f"{TAG}.epilogue", i),
            _tile_forall(f"%ept{i}", f"%forall{i}a", f"%ep{i}", f"tile_sizes [{t_m}, {t_n1}, 0]"),
            _fuse(f"%t0_{i}", f"%forall{i}b", f"%g{i}", f"%forall{i}a"),
            _fuse(f"%f0_{i}", f"%forall{i}", f"%fill{i}", f"%forall{i}b"),
            _tile_for(f"%ept2_{i}", f"%epl{i}", f"%ept{i}", [1, 1, 0]),
        ]
    else:
        root = [
            _tile_forall(f"%t0_{i}", f"%forall{i}a", f"%g{i}",
                         f"tile_sizes {[bt] * o + [t_n1, t_m, 0, 0]}"),
            _fuse(f"%f0_{i}", f"%forall{i}", f"%fill{i}", f"%forall{i}a"),
        ]
    # A batched product packs B inside the parallel loop: each core only its own elements'
    # panels (inside the batch loop, a block at a time, where K has a good block size).
    own_pack_loop = not fused_pack and not batch
    return _lines(
        f"// matmul {i}: {m}x{k} @ {k}x{n}" + (f", batch {batch} ({bt} per tile)" if batch else "")
        + f", {threads} threads of {t_m} rows x {t_n1} panels, cache blocks "
        f"[{p.nc}x{p.nr} columns, {mc} rows, {kc} deep], registers {p.mr}x{p.nr}"
        + (", fused epilogue" if epilogue else ""),
        _match(f"%g{i}", "linalg.generic", TAG, i),
        f"%fill{i} = transform.get_producer_of_operand %g{i}[2] : ({ANY}) -> {ANY}",
        _match(f"%pk{i}", "linalg.transpose", f"{TAG}.pack", i),
        *([
            # Packing B: parallel over panels (when there are enough: a single narrow
            # remainder panel is not worth a parallel loop), vectorized k_pack rows x one
            # panel at a time.
            _tile_forall(f"%pkt{i}", f"%pkf{i}", f"%pk{i}", f"num_threads [{p.threads}, 0, 0]")
            if n // p.nr >= p.threads else "",
            _tile_for(f"%pkt2_{i}", f"%pkl{i}", f"%pkt{i}" if n // p.nr >= p.threads else f"%pk{i}",
                      [1, k_pack, 0]),
            f"transform.structured.vectorize %pkt2_{i} vector_sizes [1, {k_pack}, {p.nr}] : {ANY}"]
          if own_pack_loop else []),
        *root,
        # Loops (b, n1, m, n0, k): cache blocks in the order (b, n1, k, m), then register tiles.
        _tile_for(f"%t1_{i}", f"%l1_{i}", f"%t0_{i}", z + [p.nc, mc, 0, kc],
                  [0, 1, 4, 2, 3] if batch else [0, 3, 1, 2]),
        *([  # each core packs the [NC panels, KC] block of Bp the (n1, k) loops are at
            _fuse(f"%pkt{i}", f"%forall{i}p", f"%pk{i}", f"%forall{i}"),
            # The block's slice of Bp out of the row loop, so its packing lands before it.
            f"transform.apply_licm to %l1_{i}#{2 + o} : {ANY}",
            _fuse(f"%pkt1_{i}", f"%kblock{i}", f"%pkt{i}", f"%l1_{i}#{1 + o}"),
            _tile_for(f"%pkt2_{i}", f"%pkl{i}", f"%pkt1_{i}", z + [1, k_pack, 0]),
            early_pack_vectors,
        ] if fused_pack else [  # batched, K not blocked: each core packs its elements' B first
            _fuse(f"%pkt{i}", f"%forall{i}p", f"%pk{i}", f"%forall{i}"),
            _tile_for(f"%pkt2_{i}", f"%pkl{i}", f"%pkt{i}", [1, 1, k_pack, 0]),
            early_pack_vectors,
        ] if batch else []),
        _tile_for(f"%t2_{i}", f"%l2_{i}", f"%t1_{i}", [0] * o + [1, p.mr, 0, 1]),
        _tile_for(f"%f1_{i}", f"%lf{i}", f"%f0_{i}", z + [1, 1, 0]),
        _peel(f"%l2_{i}#1", f"m{i}") if mc % p.mr else "",
        _CANONICALIZE_LOOPS.format(h=f"%forall{i}"),
        _match(f"%tiles{i}", "linalg.generic", TAG, i, f"%forall{i}"),
        f"transform.structured.vectorize %tiles{i} : {ANY}",
        f"transform.structured.vectorize %f1_{i} : {ANY}",
        f"transform.structured.vectorize %ept2_{i} : {ANY}" if epilogue else "",
        _LOWER_VECTORS.format(h=f"%forall{i}", i=i),
        late_pack_vectors,
        # One cache block spans K: each tile's accumulators can start at zero in registers.
        f'transform.annotate %lf{i}#0 "{ZERO_MARK}" : {ANY}' if kc >= k and not epilogue else "",
    )


# After vectorization: multi_reduction(mul) -> contract, then contract -> outer products ->
# fma, transfers with their permutations folded, and the accumulators hoisted out of the
# reduction loops where the tensor form allows (the rest after bufferization:
# `hoist_accumulators`).
_LOWER_VECTORS = """    transform.apply_patterns to {h} {{
      transform.apply_patterns.vector.reduction_to_contract
      transform.apply_patterns.vector.transfer_permutation_patterns
    }} : !transform.any_op
    transform.apply_patterns to {h} {{
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
    }} : !transform.any_op
    transform.apply_patterns to {h} {{
      transform.apply_patterns.vector.lower_contraction lowering_strategy = "outerproduct"
      transform.apply_patterns.vector.transfer_permutation_patterns
      transform.apply_patterns.vector.lower_outerproduct
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    transform.apply_patterns to {h} {{
      transform.apply_patterns.vector.cast_away_vector_leading_one_dim
      transform.apply_patterns.canonicalization
    }} : !transform.any_op
    // A transposing step of B's packing ([k_pack, NR] read transposed, Q K^T) as one
    // shuffle: lowered later, element by element, it was 256 extracts and inserts that
    // LLVM put back together (attention: 367 -> 331 ms of compile, the same code).
    transform.apply_patterns to {h} {{
      transform.apply_patterns.vector.lower_transpose lowering_strategy = "shuffle_1d"
    }} : !transform.any_op
    %loops{i} = transform.structured.match ops{{["scf.for"]}} in {h}
      : (!transform.any_op) -> !transform.any_op
    transform.apply_licm to %loops{i} : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops{i} : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops{i} : !transform.any_op
    transform.loop.hoist_loop_invariant_subsets %loops{i} : !transform.any_op"""


# -- convolution ------------------------------------------------------------------------------------

def _attr_ints(op: Any, name: str) -> list[int]:
    if name not in op.attributes:
        return [1, 1]
    return [int(x) for x in ir.DenseIntElementsAttr(op.attributes[name])]


def _conv_plan(conv: Any, p: Params) -> tuple[int, ...] | None:
    """(N, OH, OW, F, KH, KW, C) of a conv_2d_nhwc_hwcf the schedule handles, else None."""
    if conv.name != "linalg.conv_2d_nhwc_hwcf" or \
            not all(_static_float(v, ir.F32Type) for v in conv.operands):
        return None
    # Strides and dilations need nothing of their own: tiled to one output row, a tile's
    # input window is a slice reaching (OWR - 1) * stride + (KW - 1) * dilation + 1 columns
    # past its first, and the 1-D convolution the decomposition leaves keeps both
    # attributes (the vectorizer reads one pixel's channels per output column when strided).
    fill = conv.operands[2].owner
    if isinstance(fill, ir.Block) or fill.name != "linalg.fill":
        return None
    n, oh, ow, f = _shape(conv.operands[2])
    kh, kw, c, _ = _shape(conv.operands[1])
    if 2 * n * oh * ow * f * kh * kw * c < MIN_FLOPS or min(n, oh, ow, c) == 0:
        return None
    return n, oh, ow, f, kh, kw, c


def _zero_splat(value: ir.Value) -> bool:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return False
    text = str(owner.attributes["value"])
    return text.startswith("dense<0.000000e+00>")


def _prepare_padding(conv: Any, index: int) -> bool:
    """The padded input `insert_slice x into dense<0>` (lowering/ops/convolution.py) as an insert into a
    linalg.fill: the script vectorizes the fill and makes the insert a copy (bufferized, the
    constant would be a copy of a zero global and the insert a strided element copy)."""
    ins = conv.operands[0].owner
    if isinstance(ins, ir.Block) or ins.name != "tensor.insert_slice" or not _zero_splat(ins.operands[1]):
        return False
    strides = ir.DenseI64ArrayAttr(ins.attributes["static_strides"])
    if len(ins.operands) != 2 or any(int(x) != 1 for x in strides):
        return False  # dynamic offsets or strided (lhs dilation): leave it
    dest = ins.operands[1]
    with ir.InsertionPoint(ins), ins.location:
        zero = arith.constant(ir.F32Type.get(), 0.0)
        fill = _result(linalg.fill(zero, outs=[tensor.EmptyOp(_shape(dest), ir.F32Type.get()).result]))
    ins.operands[1] = fill
    fill.owner.attributes[TAG + ".padfill"] = _i64(index)
    ins.attributes[TAG + ".pad"] = _i64(index)
    return True


def _padding_script(i: int) -> str:
    """Fill of the padded input, one pixel's channels per vector step, and the interior
    as a linalg.copy (the affine path copies it after bufferization). Not split across
    cores: measured, the split saved nothing at run time and each parallel loop costs
    compile time (~40 ms with the async coroutines it had then; an outlined body and a
    dispatcher now, lowering/passes/parallel_tasks.py)."""
    return _lines(
        _match(f"%pf{i}", "linalg.fill", f"{TAG}.padfill", i),
        _tile_for(f"%pft2_{i}", f"%pfl{i}", f"%pf{i}", [1, 1, 1, 0]),
        f"transform.structured.vectorize %pft2_{i} : {ANY}",
        _match(f"%pi{i}", "tensor.insert_slice", f"{TAG}.pad", i),
        f"%pc{i} = transform.structured.insert_slice_to_copy %pi{i} : ({ANY}) -> {ANY}",
    )


def _pixel_tile(ow: int, mr: int) -> int:
    """Output pixels per register tile: MR, or a divisor of OW just below it (28 = 4 x 7
    rather than 3 x 8 + a peeled 4-pixel tile, which holds half the accumulators and runs
    the 3 x 3 x C reduction at half the FMAs per load)."""
    if ow <= mr or ow % mr == 0:
        return min(ow, mr)
    d = _divisor_at_most(ow, mr)
    return d if d >= mr - 1 else mr


def _conv_script(i: int, p: Params, shape: tuple[int, ...]) -> str:
    n, oh, ow, f, kh, kw, c = shape
    threads = _thread_split(n, p.threads, 1)
    split = [n // threads, 0, 0, 0, 0, 0, 0]
    if threads == 1:
        threads = _thread_split(oh, p.threads, 2)
        split = [0, oh // threads, 0, 0, 0, 0, 0]
    owr = _pixel_tile(ow, p.mr)
    fr = min(p.nr, f)  # channels per register tile; the rest of F is a peeled narrower tile
    return _lines(
        f"// conv {i}: NHWC {n}x{oh}x{ow} -> {f} channels, kernel {kh}x{kw}x{c}, {threads} threads, "
        f"registers {owr} pixels x {fr} channels",
        _match(f"%cv{i}", "linalg.conv_2d_nhwc_hwcf", TAG, i),
        f"%cfill{i} = transform.get_producer_of_operand %cv{i}[2] : ({ANY}) -> {ANY}",
        _tile_forall(f"%ct0_{i}", f"%forall{i}a", f"%cv{i}", f"tile_sizes {split}"),
        _fuse(f"%cf0_{i}", f"%forall{i}", f"%cfill{i}", f"%forall{i}a"),
        # Loops (n, oh, ow, f, kh, kw, c) in the order n, oh, f, ow, kh, kw, c: one output row
        # and channel panel, owr pixels, reduced over the window and input channels.
        _tile_for(f"%ct1_{i}", f"%cl{i}", f"%ct0_{i}", [1, 1, owr, fr, 1, 1, 1], [0, 1, 3, 2, 4, 5, 6]),
        _tile_for(f"%cf1_{i}", f"%cfl{i}", f"%cf0_{i}", [1, 1, 1, fr]),
        # Inner loop first: peeling the channel loop copies it (and invalidates its handle).
        _peel(f"%cl{i}#3", f"ow{i}") if ow % owr else "",
        _peel(f"%cl{i}#2", f"f{i}") if f % fr else "",
        _peel(f"%cfl{i}#3", f"ff{i}") if f % fr else "",
        _CANONICALIZE_LOOPS.format(h=f"%forall{i}"),
        _match(f"%convs{i}", "linalg.conv_2d_nhwc_hwcf", TAG, i, f"%forall{i}"),
        # Unit output row and kernel row: a 1-D convolution, which the vectorizer handles.
        f"%conv1d{i} = transform.structured.decompose %convs{i} : ({ANY}) -> {ANY}",
        f"transform.structured.vectorize %conv1d{i} : {ANY}",
        # The fill's tiles matched again: peeling invalidated the handle to them.
        f'%cfills{i} = transform.structured.match ops{{["linalg.fill"]}} in %forall{i} : ({ANY}) -> {ANY}',
        f"transform.structured.vectorize %cfills{i} : {ANY}",
        _LOWER_VECTORS.format(h=f"%forall{i}", i=i),
        # The window and channels are one loop nest per tile: accumulators start at zero.
        f'transform.annotate %cfl{i}#0 "{ZERO_MARK}" : {ANY}',
    )


# -- driver -----------------------------------------------------------------------------------------

_HEADER = """module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {"""
# Canonicalized at the end: the ops the fusions left dead (a fill fused into a forall
# stays outside too) would make one-shot-bufferize copy; so a stage of the scheduler
# alone (`Pipeline.replace("tiled", scheduler(...))`) bufferizes as well as the default.
_FOOTER = """
    transform.apply_patterns to %root {
      transform.apply_patterns.canonicalization
    } : !transform.any_op
    transform.yield
  }
}
"""


def _same_elements(a: ir.Type, b: ir.Type) -> bool:
    """Static tensor types of the same element type and count (one is a reshape of the other)."""
    if not (isinstance(a, ir.RankedTensorType) and isinstance(b, ir.RankedTensorType)):
        return False
    a, b = ir.RankedTensorType(a), ir.RankedTensorType(b)
    if not (a.has_static_shape and b.has_static_shape) or a.element_type != b.element_type:
        return False
    count_a = count_b = 1
    for size in a.shape:
        count_a *= size
    for size in b.shape:
        count_b *= size
    return count_a == count_b


def _reshaped(value: ir.Value, to: ir.RankedTensorType) -> ir.Value:
    """`value` viewed as `to` (same elements, row-major): collapsed to 1-D, then expanded."""
    if value.type == to:
        return value
    t = ir.RankedTensorType(value.type)
    flat = 1
    for size in t.shape:
        flat *= size
    if t.rank != 1:
        value = tensor.collapse_shape(ir.RankedTensorType.get([flat], t.element_type), value,
                                      [list(range(t.rank))])
    if to.rank != 1:
        value = tensor.expand_shape(to, value, [list(range(to.rank))], [], list(to.shape))
    return value


def _write_into_outputs(func: Any) -> None:
    """Let results computed through reshapes write the output buffers directly.

    `eliminate-empty-tensors` follows only same-typed values, so an output reached
    through the packed layout's expand/collapse_shape would be computed in a temporary
    and copied. Here the tensor.empty at the start of such a chain becomes the output
    buffer itself (`to_tensor restrict writable`, what the pass would have made of it)."""

    def visit(inner: Any) -> ir.WalkResult:
        if inner.name != "bufferization.materialize_in_destination":
            return ir.WalkResult.ADVANCE
        source, dest = inner.operands[0], inner.operands[1]
        if not isinstance(dest.type, ir.MemRefType):
            return ir.WalkResult.ADVANCE
        value, reshaped = source, False
        for _ in range(16):
            owner = value.owner
            if isinstance(owner, ir.Block):
                break
            if owner.name in ("tensor.expand_shape", "tensor.collapse_shape"):
                value, reshaped = owner.operands[0], True
            elif owner.name == "tensor.insert_slice":  # the column parts, inserted in turn
                value, reshaped = owner.operands[1], True
            elif owner.name in ("linalg.generic", "linalg.fill"):
                value = owner.operands[len(owner.operands) - len(owner.results) + value.result_number]
            elif owner.name == "tensor.empty":
                ours = TAG + ".dest" in owner.attributes  # used by the column parts only
                sole = len(list(value.uses)) == 1 or ours
                if reshaped and _same_elements(value.type, source.type) and sole:
                    with ir.InsertionPoint(owner), owner.location:
                        out = bufferization.to_tensor(source.type, dest, restrict=True, writable=True)
                        out = _reshaped(out, ir.RankedTensorType(value.type))
                    value.replace_all_uses_with(out)
                    owner.erase()
                break
            else:
                break
        return ir.WalkResult.ADVANCE

    func.walk(visit)


_MATMULS = ("linalg.matmul", "linalg.batch_matmul", "linalg.generic")


def _candidates(op: Any, p: Params) -> list[tuple[Any, tuple[int, ...]]]:
    found: list[tuple[Any, tuple[int, ...]]] = []

    def visit(inner: Any) -> ir.WalkResult:
        plan = _matmul_plan(inner, p) if inner.name in _MATMULS else \
            _conv_plan(inner, p) if inner.name == "linalg.conv_2d_nhwc_hwcf" else None
        if plan is not None:
            found.append((inner, plan))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def schedule_contractions(op: Any, pass_: Any) -> None:
    """The "tiled" stage: pack, tile, fuse, vectorize and parallelize the matmuls and
    convolutions that qualify (module docstring), with one transform script."""
    _schedule(op, PARAMS)


_schedulers: dict[tuple[int, ...], Callable[[Any, Any], None]] = {}


def scheduler(params: Params) -> Callable[[Any, Any], None]:
    """A "tiled" stage pass with other tile sizes or thread counts, e.g.
    `Pipeline.default().replace("tiled", scheduler(Params.for_target("znver4")))` or
    `scheduler(Params(threads=1, mr=4, nr=16))`. Equal Params give the same pass (kept
    for good): the compile cache knows Python passes by id(), which a dropped pass's
    successor could otherwise reuse, hitting executables tiled for other Params."""
    key = astuple(params)
    if key not in _schedulers:
        fixed = replace(params)  # later changes to `params` do not reach the pass

        @own_pass
        def schedule_contractions_with(op: Any, pass_: Any) -> None:
            _schedule(op, fixed)

        _schedulers[key] = schedule_contractions_with
    return _schedulers[key]


def _schedule(op: Any, p: Params) -> None:
    # Matmuls that the "fused" stage expanded around a reshape, one loop per role again.
    with op.context, ir.Location.unknown():
        collapse_split_contractions(op)
    found = _candidates(op, p)
    _last_script[0] = ""
    if found:
        parts: list[str] = []
        _or_restore(op, lambda: _apply(op, found, p, parts))
    # The matrix-vector products summed in lanes: their own script (lane_schedules.py).
    _or_restore(op, lambda: schedule_lanes(op))


def _or_restore(op: Any, schedule: Callable[[], None]) -> None:
    """Run `schedule` on `op`; if it fails, put `op` back as it was (unless STRICT)."""
    backup = op.clone()
    try:
        schedule()
    except Exception as e:  # noqa: BLE001 - MLIRError / ValueError from the interpreter
        if STRICT:
            raise
        # A schedule that fails leaves a half-transformed module: restore the original
        # and let the generic path compile it (correct, slower).
        _last_script[0] += f"\n// failed, not applied: {e}\n"
        block = op.regions[0].blocks[0]
        for inner in list(block.operations):
            inner.erase()
        for inner in list(backup.regions[0].blocks[0].operations):
            block.append(inner)
    finally:
        backup.erase()


def _part_params(p: Params, nr: int, columns: int, n: int) -> Params:
    """The Params of a part of the columns (`_column_parts`). A narrow part small enough
    that running it on one core leaves the others idle for under 1/16 of the product's
    time (columns x threads <= N / 16) runs on one core: that saves its parallel loop
    (with the async coroutines it had then: ~100-300 ms of compile time measured for
    N = 1000)."""
    small = 16 * columns * p.threads <= n
    return replace(p, nr=nr, threads=1 if nr != p.nr and small else p.threads)


def _apply(op: Any, found: list[tuple[Any, tuple[int, ...]]], p: Params, parts: list[str]) -> None:
    with op.context, ir.Location.unknown():
        index = 0
        for target, shape in found:
            if target.name != "linalg.conv_2d_nhwc_hwcf":
                m, n, k, batch = shape
                pe = _for_size(_for_element(p, target), target, m, n, batch)
                for i, columns, nr, fused in _pack_matmul(target, index, pe):
                    part = _part_params(pe, nr, columns, n)
                    parts.append(_matmul_script(i, part, (m, columns, k), fused, batch))
                    index = i + 1
            else:
                target.attributes[TAG] = _i64(index)
                if _prepare_padding(target, index):
                    parts.append(_padding_script(index))
                parts.append(_conv_script(index, p, shape))
                index += 1
        _write_into_outputs(op)
        text = _HEADER + "".join(parts) + _FOOTER
        _last_script[0] = text
        script = ir.Module.parse(text)
        interpreter.apply_named_sequence(op, script.body.operations[0], script)
        start_accumulators_at_zero(op)
        rows_as_slices(op)
        _strip_tags(op)


def _strip_tags(op: Any) -> None:
    def visit(inner: Any) -> ir.WalkResult:
        for name in (TAG, TAG + ".pack", TAG + ".epilogue", TAG + ".dest"):
            if name in inner.attributes:
                del inner.attributes[name]
        return ir.WalkResult.ADVANCE

    op.walk(visit)
