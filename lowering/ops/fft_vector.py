"""Stockham passes of fft (lowering/ops/fft.py) as explicit vector loops.

A radix-R pass (R = 4, or 2 once when log2 n is odd) over an axis that is not the
last one moves whole vectors of the last dimension: for every (k0, j) and every
vector of lanes along the last dimension it reads the R inputs
T[k0 r + j + p r/R], multiplies input p by the pass twiddle w_{RL}**(p k0) (one
scalar broadcast to every lane), and does the R-point DFT with additions alone
(w_4 = sign i), writing the R outputs T'[k0 + L q] at q n/R + k0 r/R + j. Every
input is read once and every product of the DFT's roots is a swap or a negation,
where a linalg.generic (one output element per iteration) would read the R inputs
and multiply by R - 1 twiddles for each of the R outputs.

The lanes are the last dimension's (the four-step method puts the transposed
rows there; any other axis has the dimensions after it there), in vectors of
VECTOR_BYTES, fewer when the dimension is shorter. Only IEEE arith ops on
vectors: no fused multiply-add, so every target computes the same bits (LLVM
splits a 512-bit vector into two AVX2 ones). Imports the lowering modules.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, bufferization, memref, scf, tensor, vector

from ..scalar.arithmetic import Elem
from .indexing import index_const

Planar = tuple[ir.Value, ir.Value]
VECTOR_BYTES = 64  # one AVX-512 register, two AVX2 ones


def lanes_for(last: int, e: Elem) -> int:
    """The vector length for a last dimension of `last` elements: the largest power of two
    dividing it, at most VECTOR_BYTES; 0 when that is under 4 lanes (scalar code does as well)."""
    limit = VECTOR_BYTES // (e.type.width // 8)
    lanes = 1
    while lanes < limit and last % (2 * lanes) == 0:
        lanes *= 2
    return lanes if lanes >= 4 else 0


Extent = int | ir.Value  # a loop bound: static, or an index value


def _index(value: Extent) -> ir.Value:
    return index_const(value) if isinstance(value, int) else value


def _loops(bounds: Sequence[tuple[Extent, int]], carried: list[ir.Value], body) -> list[ir.Value]:
    """Nested scf.for over (extent, step) pairs, outermost first, carrying `carried`."""
    def level(depth: int, ivs: list[ir.Value], values: list[ir.Value]) -> list[ir.Value]:
        if depth == len(bounds):
            return body(ivs, values)
        extent, step = bounds[depth]
        loop = scf.ForOp(index_const(0), _index(extent), index_const(step), values)
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(level(depth + 1, ivs + [loop.induction_variable], list(loop.inner_iter_args)))
        return list(loop.results)

    return level(0, [], carried)


class _Vec:
    """Complex arithmetic on planar vectors."""

    def __init__(self, vtype: ir.Type) -> None:
        self.vtype = vtype

    def splat(self, scalar: ir.Value) -> ir.Value:
        return vector.broadcast(self.vtype, scalar)

    @staticmethod
    def add(a: Planar, b: Planar) -> Planar:
        return arith.addf(a[0], b[0]), arith.addf(a[1], b[1])

    @staticmethod
    def sub(a: Planar, b: Planar) -> Planar:
        return arith.subf(a[0], b[0]), arith.subf(a[1], b[1])

    @staticmethod
    def mul(a: Planar, w: Planar) -> Planar:
        return (arith.subf(arith.mulf(a[0], w[0]), arith.mulf(a[1], w[1])),
                arith.addf(arith.mulf(a[0], w[1]), arith.mulf(a[1], w[0])))

    @staticmethod
    def times_i(a: Planar, sign: float) -> Planar:
        """a * (sign i): a swap and a negation, exact."""
        return (arith.negf(a[1]), a[0]) if sign > 0 else (a[1], arith.negf(a[0]))


def _butterfly(ys: list[Planar], sign: float) -> list[Planar]:
    """The R-point DFT (R = 2 or 4) of already twiddled inputs, w_R = exp(sign 2 pi i / R)."""
    v = _Vec
    if len(ys) == 2:
        return [v.add(ys[0], ys[1]), v.sub(ys[0], ys[1])]
    a0, a1 = v.add(ys[0], ys[2]), v.sub(ys[0], ys[2])
    a2, a3 = v.add(ys[1], ys[3]), v.times_i(v.sub(ys[1], ys[3]), sign)
    return [v.add(a0, a2), v.add(a1, a3), v.sub(a0, a2), v.sub(a1, a3)]


def pass_twiddles(radix: int, length: int, sign: float, e: Elem, roots, n: int,
                  constant, gather) -> Planar:
    """The [radix - 1, L] planar table w_{RL}**(p k0), p = 1..radix-1 (row p - 1)."""
    period = radix * length
    p, k0 = np.meshgrid(np.arange(1, radix), np.arange(length), indexing="ij")
    if roots is None:
        w = np.exp(sign * 2j * np.pi * (p * k0 % period) / period)
        return constant(w.real, e), constant(w.imag, e)

    def body(ix: list[ir.Value]) -> list[ir.Value]:
        exponent = arith.muli(arith.addi(ix[0], index_const(1)), ix[1])
        return roots.at(arith.muli(exponent, index_const(n // period)), e)  # < n: no reduction

    re, im = gather([radix - 1, length], e.type, 2, body)
    return re, im


def _flat_at(at: list[ir.Value], inner: int) -> list[ir.Value]:
    """[.., row, lane] of a [.., n, inner] view as [.., row * inner + lane] of the flat tensor."""
    return at[:-2] + [arith.addi(arith.muli(at[-2], index_const(inner)), at[-1])]


def stockham_pass(x: Planar, out: Planar, axis: int, radix: int, length: int, sign: float,
                  twiddles: Planar, e: Elem, dims: Sequence[int],
                  flat_in: bool = False, flat_out: bool = False) -> Planar:
    """One radix-`radix` Stockham pass along `axis` (not the last dimension) of planar
    tensors of `dims`, written into `out` (dead): the length-L transforms become
    length-RL ones. `flat_in` / `flat_out`: that side is the [.., n * inner] tensor whose
    [.., n, inner] view `dims` is (axis the second to last), read or written through it,
    so the four-step method's reshapes cost no pass of their own."""
    def twiddle(p: int, k0: ir.Value) -> list[ir.Value]:
        return [tensor.extract(t, [index_const(p - 1), k0]) for t in twiddles]

    re, im = _radix_pass(x, out, axis, radix, length, sign, twiddle, e, dims, flat_in, flat_out)
    return re, im


def _radix_pass(x: Planar, out: Planar, axis: int, radix: int, length: Extent, sign: float,
                twiddle, e: Elem, dims: Sequence[int], flat_in: bool = False,
                flat_out: bool = False) -> list[ir.Value]:
    """stockham_pass for tensors or buffers: `out` tensors give the written tensors, `out`
    memrefs are written in place (nothing returned). `length` may be an index value (a
    loop over the passes); twiddle(p, k0) is input p's twiddle (re, im) scalars."""
    dims = list(dims)
    rank = len(dims)
    inner = dims[-1]
    in_map = ir.AffineMap.get(rank - 1, 0, [ir.AffineDimExpr.get(rank - 2)]) if flat_in else None
    out_map = ir.AffineMap.get(rank - 1, 0, [ir.AffineDimExpr.get(rank - 2)]) if flat_out else None
    n = dims[axis]
    if isinstance(length, int):
        rows, sub = index_const(n // length), index_const(n // length // radix)
    else:
        rows = arith.divui(index_const(n), length)
        sub = arith.divui(rows, index_const(radix))
    lanes = lanes_for(dims[-1], e)
    vtype = ir.VectorType.get([lanes], e.type)
    ops = _Vec(vtype)
    read_map = ir.AffineMap.get(rank, 0, [ir.AffineDimExpr.get(rank - 1)])
    padding = e.const(0.0)
    in_place = isinstance(out[0].type, ir.MemRefType)
    bounds = ([(d, 1) for d in dims[:axis]] + [(length, 1), (sub, 1)]
              + [(d, 1) for d in dims[axis + 1:-1]] + [(dims[-1], lanes)])

    def body(ivs: list[ir.Value], outs: list[ir.Value]) -> list[ir.Value]:
        pre, k0, j, post = ivs[:axis], ivs[axis], ivs[axis + 1], ivs[axis + 2:]
        start = arith.addi(arith.muli(k0, rows), j)
        ys = []
        for p in range(radix):
            offset = arith.muli(sub, index_const(p)) if p else None
            at = pre + [arith.addi(start, offset) if p else start] + post
            if flat_in:
                at = _flat_at(at, inner)
            value = tuple(vector.transfer_read(vtype, part, at, in_map or read_map, padding, [True])
                          for part in x)
            if p:
                w = twiddle(p, k0)
                value = ops.mul(value, (ops.splat(w[0]), ops.splat(w[1])))
            ys.append(value)
        written = list(outs)
        base = arith.addi(arith.muli(k0, sub), j)
        for q, value in enumerate(_butterfly(ys, sign)):
            at = pre + [arith.addi(base, index_const(q * (n // radix)))] + post
            if flat_out:
                at = _flat_at(at, inner)
            if in_place:
                for part, target in zip(value, out):
                    vector.transfer_write(None, part, target, at, out_map or read_map, [True])
            else:
                written = [vector.transfer_write(w.type, part, w, at, out_map or read_map, [True])
                           for part, w in zip(value, written)]
        return [] if in_place else written

    return _loops(bounds, [] if in_place else list(out), body)


LOOPED_MIN_PASSES = 3  # radix-4 passes from which they run as one loop over the passes


def looped_stockham(x: Planar, dims: Sequence[int], axis: int, sign: float, e: Elem, constant,
                    flat_in: bool = False, flat_out: bool = False) -> Planar | None:
    """The radix-4 passes of a length-n transform along `axis` (twiddles as constants)
    as one scf.for over the passes, ping-ponging between two buffers of their own
    (memref.alloc; the result handed back with bufferization.to_tensor restrict): one
    copy of the pass's code instead of one per pass (fft 1M's lowering and JIT time
    scale with its code). The length L = 4**p, the pass's rows and its column of the
    concatenated twiddle table are index values; every value is computed as by
    stockham_pass, bit for bit. Pass 0 reads `x`'s buffers (bufferization.to_buffer
    read_only; viewed as [.., n, inner] when `flat_in`); a radix-2 pass (log2 n odd)
    follows the loop; `flat_out` views the last buffer as [.., n * inner]. None when
    there are fewer than LOOPED_MIN_PASSES radix-4 passes (the unrolled passes are as
    short)."""
    dims = list(dims)
    n = dims[axis]
    fours, rows = 0, n
    while rows % 4 == 0:
        fours, rows = fours + 1, rows // 4
    if fours < LOOPED_MIN_PASSES:
        return None
    # Pass p's twiddles w_{4L}**(q k0), q = 1..3, k0 < L = 4**p, at columns (4**p - 1) / 3.
    blocks = []
    for p in range(fours):
        length = 4 ** p
        q, k0 = np.meshgrid(np.arange(1, 4), np.arange(length), indexing="ij")
        blocks.append(np.exp(sign * 2j * np.pi * (q * k0 % (4 * length)) / (4 * length)))
    table = np.concatenate(blocks, axis=1)
    tw = (constant(table.real, e), constant(table.imag, e))

    def twiddle_at(column: ir.Value):
        def twiddle(p: int, k0: ir.Value) -> list[ir.Value]:
            return [tensor.extract(t, [index_const(p - 1), arith.addi(column, k0)]) for t in tw]
        return twiddle

    memtype = ir.MemRefType.get(dims, e.type)
    buffers = [tuple(memref.alloc(memtype, [], [], alignment=64) for _ in range(2)) for _ in range(2)]
    # Pass 0 reads the operand's planes in place (read only): the flat [.., n * inner]
    # ones viewed as [.., n, inner].
    operand = []
    for part in x:
        shape = list(ir.RankedTensorType(part.type).shape)
        buffer = bufferization.to_buffer(ir.MemRefType.get(shape, e.type), part, read_only=True)
        if flat_in:
            groups = [[k] for k in range(len(dims) - 2)] + [[len(dims) - 2, len(dims) - 1]]
            buffer = memref.expand_shape(memtype, buffer, groups, [], dims)
        operand.append(buffer)
    loop = scf.ForOp(index_const(0), index_const(fours), index_const(1), [])
    with ir.InsertionPoint(loop.body):
        p = loop.induction_variable
        # Pass p writes buffers[p % 2] and reads the other one (pass 0 the operand).
        odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(p, index_const(1)), index_const(0))
        first = arith.cmpi(arith.CmpIPredicate.eq, p, index_const(0))
        source = tuple(arith.select(first, o, arith.select(odd, a, b))
                       for o, a, b in zip(operand, buffers[0], buffers[1]))
        target = tuple(arith.select(odd, b, a) for a, b in zip(buffers[0], buffers[1]))
        length = arith.shli(index_const(1), arith.shli(p, index_const(1)))
        column = arith.divui(arith.subi(length, index_const(1)), index_const(3))
        _radix_pass(source, target, axis, 4, length, sign, twiddle_at(column), e, dims)
        scf.YieldOp([])
    last = (fours - 1) % 2
    if rows == 2:
        length = 4 ** fours
        tw2 = pass_twiddles(2, length, sign, e, None, n, constant, None)

        def twiddle2(p: int, k0: ir.Value) -> list[ir.Value]:
            return [tensor.extract(t, [index_const(p - 1), k0]) for t in tw2]

        _radix_pass(buffers[last], buffers[1 - last], axis, 2, length, sign, twiddle2, e, dims)
        last = 1 - last
    result = list(buffers[last])
    if flat_out:
        flat = dims[:-2] + [dims[-2] * dims[-1]]
        groups = [[k] for k in range(len(dims) - 2)] + [[len(dims) - 2, len(dims) - 1]]
        result = [memref.collapse_shape(ir.MemRefType.get(flat, e.type), m, groups) for m in result]
    re, im = (bufferization.to_tensor(tensor_of(m), m, restrict=True, writable=True) for m in result)
    return re, im


def tensor_of(buffer: ir.Value) -> ir.Type:
    memtype = ir.MemRefType(buffer.type)
    return ir.RankedTensorType.get(list(memtype.shape), memtype.element_type)
