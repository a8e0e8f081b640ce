"""Lowering of fft: one 1-D transform per axis, on planar (real, imaginary) tensors.

The data is kept as two real tensors (f32 for c64, f64 for c128), so every
loop body is plain arith on floats, which the pipeline can vectorize (complex
values cannot live in vectors). A transform along an axis of length n picks:

- n <= DIRECT_MAX: a direct DFT, a contraction with the constant n x n
  matrix w**(jk mod n) (computed in float64 by numpy): one small loop nest.
- n a power of two: Stockham's autosort FFT, radix-4 linalg.generic passes
  (and one radix-2 pass for odd log2 n), no bit reversal. With T[k, j] the
  length-L transforms of the r = n / L interleaved subsequences x[j],
  x[j + r], ..., a radix-R pass computes
      T'[k0 + L q, j] = sum_p w_{RL}**(p (k0 + L q)) T[k0, j + p r/R],
  reading and writing the axis through affine index maps (k0 r + j, ...), the
  dimensions after the axis innermost, so the rows it moves are contiguous.
  When the last dimension holds 4 or more lanes (always, past 32 points, in the
  four-step method) a pass is instead an explicit vector loop
  (lowering/ops/fft_vector.py) that reads each input once and does the radix-4
  DFT by additions.
  The last axis has nothing after it, so it is transformed by the four-step
  method: as [n2, n1] (j = j2 n1 + j1), Stockham along n2 (rows of n1), a
  twiddle by w_n**(j1 k2) fused with a transpose (for planes of >= 2 MB, the
  transpose by vector tiles first: ops/transpose_tiles.py),
  Stockham along n1 (rows of n2), and the result read back as k = k1 n2 + k2.
- any other n: Bluestein's algorithm: w**(jk) = c[j] c[k] conj(c[k - j]) with
  the chirp c[t] = w**(t*t/2), so the DFT is a circular convolution with the
  chirp, done with power-of-two FFTs of length M >= 2n - 1.

Twiddles are numpy constants (computed in float64) up to CONSTANT_MAX points;
longer transforms gather them from two short f64 sin/cos tables (constants
too: w**(hi*S) * w**lo, formed at run time), so no constant is ever large. Successive
Stockham passes write into the buffers the pass before them read, so a
transform uses two pairs of buffers, not one per pass. IFFT transforms with
the conjugate twiddles and scales by 1 / prod(n) at the end. An even last length n of RFFT and
IRFFT is one complex transform of length n / 2 (the even samples as real parts, the odd ones
as imaginary parts) and a pass that separates or combines the two halves' spectra: half the
work, and the real operand is never made complex. Otherwise RFFT transforms the last axis first and
keeps its n // 2 + 1 first frequencies before the other axes; IRFFT does the
other axes first, rebuilds the full last axis from the conjugate mirror of the
given half and keeps the real part (as numpy: the imaginary parts of the
frequencies 0 and n / 2 are ignored).

No tensor is ever reshaped or sliced into a view: every change of layout is
a linalg.generic that reads its source with `tensor.extract`. The pipeline's
affine-loop-fusion tracks dependences by memref value and does not see
through memref views (expand_shape, collapse_shape, subview); a loop reading a
view of another loop's output could be moved above that loop.
Imports `dialect` and the lowering modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from mlir import ir
from mlir.dialects import arith, linalg, tensor
from mlir.dialects import complex as cx
from mlir.dialects import math as mmath

from ...dialect.element_types import PrimitiveType
from ..patterns.framework import OpView, lowers
from ..scalar.arithmetic import Elem
from . import transpose_tiles
from .fft_vector import lanes_for, looped_stockham, pass_twiddles, stockham_pass
from .linear_algebra import tensor_type

P = PrimitiveType
Planar = tuple[ir.Value, ir.Value]  # (real parts, imaginary parts), same shape
DIRECT_MAX = 32  # the longest axis transformed by a direct DFT (short: the matrix is small)
CONSTANT_MAX = 1 << 14  # the longest transform whose twiddles are compile-time constants
# Planes (re or im) of at least this many bytes are transposed by vector tiles in the
# four-step method (f32: from 2**19 points; 2**18 measured 2.5 ms tiled, 2.2 ms not).
TILED_TRANSPOSE_MIN_BYTES = 1 << 21
PACKED_MIN = 4  # the shortest even real transform done as a complex one of half its length


# -- linalg helpers ------------------------------------------------------------------------------

def _d(i: int) -> ir.AffineExpr:
    return ir.AffineDimExpr.get(i)


def _map(loops: int, exprs: Sequence[ir.AffineExpr]) -> ir.AffineMap:
    return ir.AffineMap.get(loops, 0, list(exprs))


def _identity(rank: int) -> ir.AffineMap:
    return ir.AffineMap.get_identity(rank)


def _dims(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _empty(dims: Sequence[int], elem: ir.Type) -> ir.Value:
    return tensor.EmptyOp(list(dims), elem).result


def _generic(inputs: Sequence[ir.Value], in_maps: Sequence[ir.AffineMap], out_dims: Sequence[int],
             elem: ir.Type, n_out: int, body: Callable[..., Sequence[ir.Value]],
             out_map: ir.AffineMap | None = None, iterators: Sequence[str] | None = None,
             inits: Sequence[ir.Value] | None = None) -> list[ir.Value]:
    """A linalg.generic with `n_out` outputs of `out_dims`; body(*input scalars, *outputs)."""
    loops = in_maps[0].n_dims if in_maps else len(out_dims)
    outs = list(inits) if inits is not None else [_empty(out_dims, elem) for _ in range(n_out)]
    maps = list(in_maps) + [out_map or _identity(loops)] * n_out
    op = linalg.GenericOp_(list(inputs), outs, maps, list(iterators or ["parallel"] * loops))
    block = op.regions[0].blocks[0]
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(body(*block.arguments)))
    return list(op.results)


def _gather(out_dims: Sequence[int], elem: ir.Type, n_out: int,
            body: Callable[[list[ir.Value]], Sequence[ir.Value]]) -> list[ir.Value]:
    """A generic over `out_dims` whose body(loop indices) reads its sources itself, with
    tensor.extract: how every change of layout is made (see the module docstring)."""
    rank = len(out_dims)
    return _generic([], [], out_dims, elem, n_out,
                    lambda *_: body([linalg.IndexOp(i).result for i in range(rank)]))


def _idx(v: int) -> ir.Value:
    return arith.constant(ir.IndexType.get(), v)


def _div(x: ir.Value, d: int) -> ir.Value:
    """x // d for a power of two d, as a shift: the affine vectorizer gives up on any
    function holding an integer division (lowering/passes/vectorize.py)."""
    assert d & (d - 1) == 0
    return arith.shrui(x, _idx(d.bit_length() - 1))


def _mod(x: ir.Value, d: int) -> ir.Value:
    """x mod d for a power of two d, as a mask (see _div)."""
    assert d & (d - 1) == 0
    return arith.andi(x, _idx(d - 1))


def _cmul(ar: ir.Value, ai: ir.Value, br: ir.Value, bi: ir.Value) -> list[ir.Value]:
    """(ar + i ai)(br + i bi) on real scalars."""
    return [arith.subf(arith.mulf(ar, br), arith.mulf(ai, bi)),
            arith.addf(arith.mulf(ar, bi), arith.mulf(ai, br))]


def _narrow(e: Elem, x: ir.Value) -> ir.Value:
    """An f64 scalar in e's type (f32 or f64)."""
    return x if e.t == P.F64 else arith.truncf(e.type, x)


def _constant(values: np.ndarray, e: Elem) -> ir.Value:
    array = np.ascontiguousarray(values, dtype=np.float64 if e.t == P.F64 else np.float32)
    attr = ir.DenseElementsAttr.get(array, type=e.type)
    return arith.ConstantOp(tensor_type(array.shape, e.type), attr).result


def _extract(x: Planar, at: Sequence[ir.Value]) -> list[ir.Value]:
    return [tensor.extract(x[0], list(at)), tensor.extract(x[1], list(at))]


# -- twiddles and chirps ---------------------------------------------------------------------------

def _angle_table(count: int, step: int, period: int, sign: float) -> Planar:
    """cos and sin (f64, [count]) of sign 2 pi ((t * step) mod period) / period, as
    constants: each angle formed as the f64 operations of a run-time table would form it
    (an exact integer, times the rounded sign 2 pi / period), its cos and sin from the C
    library (math.cos, the function the JIT's own calls reach). A run-time table was 2
    libm calls per entry per call of the program, and its 16-lane loop 32 scalarized
    calls of machine code per table (most of rfft 1M's code after the passes)."""
    scale = sign * 2.0 * math.pi / period
    angles = [float(t * step % period) * scale for t in range(count)]
    f64 = Elem(P.F64)
    return (_constant(np.array([math.cos(a) for a in angles]), f64),
            _constant(np.array([math.sin(a) for a in angles]), f64))


class _Roots:
    """w**t = exp(sign 2 pi i t / period) for any t, from two tables of about sqrt(period)
    entries: w**t = w**(hi S) * w**lo with t mod period = hi S + lo. The product is formed
    in f64, so it is exact to f32 and within a few ulp in f64."""

    def __init__(self, period: int, sign: float) -> None:
        self.period = period
        self.step = 1 << ((period.bit_length() + 1) // 2)  # S >= sqrt(period)
        self.high = _angle_table(-(-period // self.step), self.step, period, sign)
        self.low = _angle_table(self.step, 1, period, sign)

    def at(self, t: ir.Value, e: Elem) -> list[ir.Value]:
        """w**t (t an index value in [0, period)) as two scalars of e's type."""
        hi = _div(t, self.step)
        lo = _mod(t, self.step)
        return [_narrow(e, v) for v in _cmul(*_extract(self.high, [hi]), *_extract(self.low, [lo]))]


def _chirp_at(t: ir.Value, n: int, sign: float, e: Elem) -> list[ir.Value]:
    """c[t] = exp(sign i pi t^2 / n), with t^2 reduced mod 2n exactly, in integers."""
    f64 = Elem(P.F64)
    i64 = ir.IntegerType.get_signless(64)
    t = arith.index_cast(i64, t)
    reduced = arith.remsi(arith.muli(t, t), arith.constant(i64, 2 * n))
    angle = arith.mulf(arith.sitofp(f64.type, reduced), f64.const(sign * math.pi / n))
    return [_narrow(e, mmath.cos(angle)), _narrow(e, mmath.sin(angle))]


# -- power-of-two lengths: Stockham ----------------------------------------------------------------

def _stage_twiddles(radix: int, length: int, sign: float, e: Elem, roots: _Roots | None,
                    n: int) -> list[Planar]:
    """For p = 1..radix-1, the [radix, L] tensors W_p[q, k0] = w_{RL}**(p (k0 + L q)): the
    twiddle of input p of output q (the radix-point DFT's root folded in)."""
    period = radix * length
    q, k0 = np.meshgrid(np.arange(radix), np.arange(length), indexing="ij")
    tables = []
    for p in range(1, radix):
        if roots is None:
            w = np.exp(sign * 2j * np.pi * ((p * (k0 + length * q)) % period) / period)
            tables.append((_constant(w.real, e), _constant(w.imag, e)))
            continue

        def body(ix: list[ir.Value], p: int = p) -> list[ir.Value]:
            k = arith.addi(ix[1], arith.muli(ix[0], _idx(length)))
            exponent = _mod(arith.muli(k, _idx(p)), period)
            return roots.at(arith.muli(exponent, _idx(n // period)), e)  # w_{RL} = w_n**(n/RL)

        re, im = _gather([radix, length], e.type, 2, body)
        tables.append((re, im))
    return tables


def _vector_stockham(x: Planar, dims: list[int], axis: int, sign: float, e: Elem,
                     flat_in: bool = False, flat_out: bool = False) -> Planar:
    """_stockham's passes as vector loops (lowering/ops/fft_vector.py), on tensors of `dims`
    (the first pass reads, the last one writes, the flat [.., n * inner] tensor instead when
    asked: see stockham_pass)."""
    n = dims[axis]
    roots = _Roots(n, sign) if n > CONSTANT_MAX else None
    if roots is None:
        looped = looped_stockham(x, dims, axis, sign, e, _constant, flat_in, flat_out)
        if looped is not None:
            return looped
    flat_dims = dims[:-2] + [dims[-2] * dims[-1]]
    re, im = x
    spare: Planar | None = None
    length, rows = 1, n
    first = True
    while rows > 1:
        radix = 4 if rows % 4 == 0 else 2
        last = rows == radix
        tw = pass_twiddles(radix, length, sign, e, roots, n, _constant, _gather)
        previous = (re, im)
        out_dims = flat_dims if last and flat_out else dims
        # Each pass writes into the tensors the pass before it read (dead by then).
        dest = spare if spare is not None and _dims(spare[0]) == out_dims else (
            _empty(out_dims, e.type), _empty(out_dims, e.type))
        re, im = stockham_pass((re, im), dest, axis, radix, length, sign, tw, e, dims,
                               flat_in=first and flat_in, flat_out=last and flat_out)
        spare = previous
        first = False
        length, rows = length * radix, rows // radix
    return re, im


def _stockham(x: Planar, axis: int, sign: float, e: Elem) -> Planar:
    """The unscaled DFT (w = exp(sign 2 pi i / n)) along `axis` (not the last one), n = 2**m.

    Radix-4 passes (half the memory traffic of radix-2 ones), and one radix-2 pass when m
    is odd. A pass of radix R turns the length-L transforms of r interleaved subsequences
    into length-RL ones: out[k0 + L q, j] = sum_p W_p[q, k0] T[k0, j + p r/R].
    """
    dims = _dims(x[0])
    n = dims[axis]
    before, after = dims[:axis], dims[axis + 1:]
    nb = len(before)
    loops = nb + 3 + len(after)
    q, k0, j = _d(nb), _d(nb + 1), _d(nb + 2)
    pre = [_d(i) for i in range(nb)]
    post = [_d(nb + 3 + i) for i in range(len(after))]
    re, im = x
    # Twiddles: constants while short, else gathered from tables of about sqrt(n) roots.
    roots = _Roots(n, sign) if n > CONSTANT_MAX else None
    # Each pass writes into the tensors the pass before it read (dead by then), so that
    # bufferization ping-pongs between two buffers instead of allocating one per pass:
    # large fresh allocations cost page faults on every call.
    spare: Planar | None = None
    length, rows = 1, n  # L and r of the module docstring
    if axis < len(dims) - 1 and lanes_for(dims[-1], e):
        return _vector_stockham(x, dims, axis, sign, e)
    while rows > 1:
        radix = 4 if rows % 4 == 0 else 2
        sub = rows // radix
        tables = _stage_twiddles(radix, length, sign, e, roots, n)
        # Loops (before..., q, k0, j, after...); `shape` only gives q, k0, j their ranges.
        shape = _empty([radix, length, sub], ir.IntegerType.get_signless(8))
        inputs: list[ir.Value] = [shape]
        maps = [_map(loops, [q, k0, j])]
        for p in range(radix):
            inputs += [re, im]
            maps += [_map(loops, pre + [k0 * rows + j + p * sub] + post)] * 2
        for table in tables:
            inputs += list(table)
            maps += [_map(loops, [q, k0])] * 2

        def butterfly(*args: ir.Value, radix: int = radix) -> list[ir.Value]:
            xs = args[1: 1 + 2 * radix]
            ws = args[1 + 2 * radix: 1 + 2 * radix + 2 * (radix - 1)]
            acc_r, acc_i = xs[0], xs[1]
            for p in range(1, radix):
                tr, ti = _cmul(ws[2 * p - 2], ws[2 * p - 1], xs[2 * p], xs[2 * p + 1])
                acc_r, acc_i = arith.addf(acc_r, tr), arith.addf(acc_i, ti)
            return [acc_r, acc_i]

        out = _map(loops, pre + [q * (n // radix) + k0 * sub + j] + post)
        previous = (re, im)
        re, im = _generic(inputs, maps, dims, e.type, 2, butterfly, out_map=out, inits=spare)
        spare = previous
        length, rows = length * radix, sub
    return re, im


def _fft_last_pow2(x: Planar, sign: float, e: Elem) -> Planar:
    """The unscaled DFT along the last axis, of length n = 2**m, by the four-step method."""
    dims = _dims(x[0])
    lead, n = dims[:-1], dims[-1]
    r = len(lead)
    n1 = 1 << ((n.bit_length() - 1) // 2)
    n2 = n // n1
    fused = lanes_for(n1, e) and lanes_for(n2, e)
    # [.., n] as [.., n2, n1]: j = j2 n1 + j1 (read so by the first vector pass).
    if fused:
        y = _vector_stockham(x, lead + [n2, n1], r, sign, e, flat_in=True)
    else:
        y = _gather(lead + [n2, n1], e.type, 2, lambda ix: _extract(
            x, ix[:r] + [arith.addi(arith.muli(ix[r], _idx(n1)), ix[r + 1])]))
        y = _stockham((y[0], y[1]), r, sign, e)  # [.., k2, j1]
    # z[.., j1, k2] = y[.., k2, j1] w**(j1 k2): a transpose and a twiddle.
    if n <= CONSTANT_MAX:
        exponent = np.outer(np.arange(n1), np.arange(n2)) % n
        w = np.exp(sign * 2j * np.pi * exponent / n)
        tw = [_constant(w.real, e), _constant(w.imag, e)]
        loops = r + 2
        swapped = _map(loops, [_d(i) for i in range(r)] + [_d(r + 1), _d(r)])
        by_pair = _map(loops, [_d(r), _d(r + 1)])
        z = _generic([y[0], y[1], tw[0], tw[1]], [swapped, swapped, by_pair, by_pair], lead + [n1, n2],
                     e.type, 2, lambda yr, yi, wr, wi, *_: _cmul(yr, yi, wr, wi))
    else:
        roots = _Roots(n, sign)
        # The transpose by vector tiles first (parallel, each cache line read once): read
        # transposed element by element, it was 40% of fft 1M's time. Only from
        # TILED_TRANSPOSE_MIN_BYTES: smaller planes stay in L2, where the element reads
        # were as fast, and the tiles' code costs ~80 ms of compile time.
        swap = list(range(r)) + [r + 1, r]
        tiled = (math.prod(lead) * n * e.type.width // 8 >= TILED_TRANSPOSE_MIN_BYTES
                 and transpose_tiles.applies(lead + [n2, n1], swap, e.type))
        if tiled:
            y = tuple(transpose_tiles.transpose_tiles(part, lead + [n2, n1], swap) for part in y)

        def twiddle(ix: list[ir.Value]) -> list[ir.Value]:
            j1, k2 = ix[r], ix[r + 1]
            value = _extract(y, ix[:r] + ([j1, k2] if tiled else [k2, j1]))
            exponent = _mod(arith.muli(j1, k2), n)
            return _cmul(*value, *roots.at(exponent, e))

        z = _gather(lead + [n1, n2], e.type, 2, twiddle)
    if fused:  # k = k1 n2 + k2, written so by the last vector pass
        return _vector_stockham((z[0], z[1]), lead + [n1, n2], r, sign, e, flat_out=True)
    z = _stockham((z[0], z[1]), r, sign, e)  # [.., k1, k2]
    # k = k1 n2 + k2.
    re, im = _gather(lead + [n], e.type, 2, lambda ix: _extract(
        z, ix[:r] + [_div(ix[r], n2), _mod(ix[r], n2)]))
    return re, im


def _pow2(x: Planar, axis: int, sign: float, e: Elem) -> Planar:
    if axis == len(_dims(x[0])) - 1:
        return _fft_last_pow2(x, sign, e)
    return _stockham(x, axis, sign, e)


# -- other lengths -------------------------------------------------------------------------------

def _direct(x: Planar, axis: int, sign: float, e: Elem) -> Planar:
    """The DFT along `axis` as a contraction with the constant matrix w**(jk)."""
    dims = _dims(x[0])
    n, rank = dims[axis], len(dims)
    jk = np.outer(np.arange(n), np.arange(n)) % n
    angle = sign * 2.0 * np.pi * jk / n
    w_re, w_im = _constant(np.cos(angle), e), _constant(np.sin(angle), e)
    inits = [linalg.fill(e.const(0.0), outs=[_empty(dims, e.type)]) for _ in range(2)]
    # Loops (dims..., j): the output dims, then the contracted j last.
    loops = rank + 1
    j = _d(rank)
    xm = _map(loops, [j if i == axis else _d(i) for i in range(rank)])
    wm = _map(loops, [_d(axis), j])

    def body(xr: ir.Value, xi: ir.Value, wr: ir.Value, wi: ir.Value, acc_r: ir.Value,
             acc_i: ir.Value) -> list[ir.Value]:
        pr, pi = _cmul(xr, xi, wr, wi)
        return [arith.addf(acc_r, pr), arith.addf(acc_i, pi)]

    re, im = _generic([x[0], x[1], w_re, w_im], [xm, xm, wm, wm], dims, e.type, 2, body,
                      out_map=_map(loops, [_d(i) for i in range(rank)]),
                      iterators=["parallel"] * rank + ["reduction"], inits=inits)
    return re, im


def _bluestein(x: Planar, axis: int, sign: float, e: Elem) -> Planar:
    """The DFT along `axis` for any n, as a chirp convolution of power-of-two length M."""
    dims = _dims(x[0])
    n = dims[axis]
    size = 1 << (2 * n - 2).bit_length()  # the smallest power of two >= 2n - 1
    padded_dims = dims[:axis] + [size] + dims[axis + 1:]
    zero = e.const(0.0)

    def weighted(ix: list[ir.Value]) -> list[ir.Value]:
        """x[t] c[t] for t < n, then zeros up to M."""
        t = ix[axis]
        inside = arith.cmpi(arith.CmpIPredicate.ult, t, _idx(n))
        safe = arith.select(inside, t, _idx(0))
        value = _cmul(*_extract(x, ix[:axis] + [safe] + ix[axis + 1:]), *_chirp_at(safe, n, sign, e))
        return [arith.select(inside, v, zero) for v in value]

    padded = _gather(padded_dims, e.type, 2, weighted)

    def chirp_filter(ix: list[ir.Value]) -> list[ir.Value]:
        """conj(c[t]) at t and M - t for t < n; zero in between."""
        t = ix[0]
        low = arith.cmpi(arith.CmpIPredicate.ult, t, _idx(n))
        high = arith.cmpi(arith.CmpIPredicate.ugt, t, _idx(size - n))
        u = arith.select(low, t, arith.subi(_idx(size), t))
        u = arith.select(arith.ori(low, high), u, _idx(0))
        re, im = _chirp_at(u, n, -sign, e)
        inside = arith.ori(low, high)
        return [arith.select(inside, re, zero), arith.select(inside, im, zero)]

    if size <= CONSTANT_MAX:
        t = np.arange(size)
        u = np.where(t < n, t, size - t)
        phase = np.where((t < n) | (t > size - n), -sign * np.pi * ((u * u) % (2 * n)) / n, np.nan)
        taps = np.where(np.isnan(phase), 0, np.exp(1j * np.nan_to_num(phase)))
        taps = np.fft.fft(taps)
        spectrum = (_constant(taps.real, e), _constant(taps.imag, e))
    else:
        filt = _gather([size], e.type, 2, chirp_filter)
        spectrum = _fft_last_pow2((filt[0], filt[1]), -1.0, e)
    transformed = _pow2((padded[0], padded[1]), axis, -1.0, e)
    rank = len(dims)
    by_axis = _map(rank, [_d(axis)])
    product = _generic([transformed[0], transformed[1], spectrum[0], spectrum[1]],
                       [_identity(rank)] * 2 + [by_axis] * 2, padded_dims, e.type, 2,
                       lambda pr, pi, hr, hi, *_: _cmul(pr, pi, hr, hi))
    conv = _pow2((product[0], product[1]), axis, 1.0, e)
    inv = e.const(1.0 / size)

    def finish(ix: list[ir.Value]) -> list[ir.Value]:
        zr, zi = _cmul(*_extract(conv, ix), *_chirp_at(ix[axis], n, sign, e))
        return [arith.mulf(zr, inv), arith.mulf(zi, inv)]

    re, im = _gather(dims, e.type, 2, finish)
    return re, im


def _dft_axis(x: Planar, axis: int, sign: float, e: Elem) -> Planar:
    """The unscaled DFT of planar tensors along `axis`, w = exp(sign 2 pi i / n)."""
    dims = _dims(x[0])
    n = dims[axis]
    if n <= 1 or math.prod(dims) == 0:
        return x
    if n <= DIRECT_MAX:
        return _direct(x, axis, sign, e)
    if n & (n - 1) == 0:
        return _pow2(x, axis, sign, e)
    return _bluestein(x, axis, sign, e)


# -- the op --------------------------------------------------------------------------------------

def _split(value: ir.Value, dims: Sequence[int], e: Elem, is_complex: bool) -> Planar:
    """A complex tensor as planar (re, im); a real one with zero imaginary parts."""
    def body(z: ir.Value, *_: ir.Value) -> list[ir.Value]:
        return [cx.re(z), cx.im(z)] if is_complex else [z, e.const(0.0)]

    re, im = _generic([value], [_identity(len(dims))], dims, e.type, 2, body)
    return re, im


def _join(x: Planar, complex_type: ir.Type, scale: float, e: Elem) -> ir.Value:
    """Planar (re, im) as one complex tensor, multiplied by `scale`."""
    dims = _dims(x[0])

    def body(re: ir.Value, im: ir.Value, *_: ir.Value) -> list[ir.Value]:
        if scale != 1.0:
            re, im = arith.mulf(re, e.const(scale)), arith.mulf(im, e.const(scale))
        return [cx.create_(complex_type, re, im)]

    (out,) = _generic(list(x), [_identity(len(dims))] * 2, dims, complex_type, 1, body)
    return out


def _first_frequencies(x: Planar, count: int, e: Elem) -> Planar:
    """The first `count` entries of the last axis."""
    dims = _dims(x[0])
    re, im = _gather(dims[:-1] + [count], e.type, 2, lambda ix: _extract(x, ix))
    return re, im


def _mirror_last(x: Planar, n: int, e: Elem) -> Planar:
    """The full length-n last axis of a Hermitian spectrum from its n // 2 + 1 first entries:
    entry k > n // 2 is conj(entry n - k)."""
    dims = _dims(x[0])
    given = dims[-1]

    def body(ix: list[ir.Value]) -> list[ir.Value]:
        k = ix[-1]
        mirrored = arith.cmpi(arith.CmpIPredicate.uge, k, _idx(given))
        source = arith.select(mirrored, arith.subi(_idx(n), k), k)
        re, im = _extract(x, ix[:-1] + [source])
        return [re, arith.select(mirrored, arith.negf(im), im)]

    re, im = _gather(dims[:-1] + [n], e.type, 2, body)
    return re, im


# -- real transforms of even length: half-length complex transforms ------------------------------

def _half_twiddles(n: int, sign: float, e: Elem) -> Callable[[ir.Value], list[ir.Value]]:
    """k -> w_n**k = exp(sign 2 pi i k / n) for k in [0, n/2]: a constant table while short."""
    if n <= CONSTANT_MAX:
        w = np.exp(sign * 2j * np.pi * np.arange(n // 2 + 1) / n)
        table = (_constant(w.real, e), _constant(w.imag, e))
        return lambda k: _extract(table, [k])
    roots = _Roots(n, sign)
    return lambda k: roots.at(k, e)


def _rfft_last(x: ir.Value, n: int, sign: float, e: Elem) -> Planar:
    """The first n/2 + 1 frequencies of the DFT of the real x along its last axis (n even),
    by one complex DFT of length m = n/2: z[j] = x[2j] + i x[2j+1] has Z = E + i O, E and O
    the transforms of the even and odd samples, so with B = conj(Z[m - k])
        X[k] = (Z[k] + B) / 2 + w_n**k (Z[k] - B) / 2i   (Z[m] = Z[0])."""
    dims = _dims(x)
    lead, m = dims[:-1], n // 2
    r = len(lead)
    z = _gather(lead + [m], e.type, 2, lambda ix: [
        tensor.extract(x, ix[:r] + [arith.addi(arith.muli(ix[r], _idx(2)), _idx(odd))])
        for odd in (0, 1)])
    big = _dft_axis((z[0], z[1]), r, sign, e)
    twiddle = _half_twiddles(n, sign, e)
    half = e.const(0.5)

    def post(ix: list[ir.Value]) -> list[ir.Value]:
        k = ix[r]
        a_at = arith.select(arith.cmpi(arith.CmpIPredicate.eq, k, _idx(m)), _idx(0), k)
        b_at = arith.select(arith.cmpi(arith.CmpIPredicate.eq, k, _idx(0)), _idx(0),
                            arith.subi(_idx(m), k))
        ar, ai = _extract(big, ix[:r] + [a_at])
        br, bi = _extract(big, ix[:r] + [b_at])
        bi = arith.negf(bi)
        er, ei = arith.mulf(arith.addf(ar, br), half), arith.mulf(arith.addf(ai, bi), half)
        dr, di = arith.subf(ar, br), arith.subf(ai, bi)
        odd = [arith.mulf(di, half), arith.negf(arith.mulf(dr, half))]  # D / 2i
        tr, ti = _cmul(*twiddle(k), *odd)
        return [arith.addf(er, tr), arith.addf(ei, ti)]

    re, im = _gather(lead + [m + 1], e.type, 2, post)
    return re, im


def _irfft_last(x: Planar, n: int, sign: float, scale: float, e: Elem) -> ir.Value:
    """The real inverse along the last axis (n even) of the n/2 + 1 given frequencies, times
    `scale`, by one complex inverse DFT of length m = n/2 (the inverse of _rfft_last):
    Z[k] = E[k] + i O[k] with 2E[k] = X[k] + B, 2O[k] = (X[k] - B) w_n**-k, B = conj(X[m-k]);
    then x[2j] + i x[2j+1] = z[j] / m. As numpy, the imaginary parts of X[0] and X[m] are
    ignored (the factors 2 go into the scale: the unscaled inverse gives n x)."""
    dims = _dims(x[0])
    lead, m = dims[:-1], n // 2
    r = len(lead)
    twiddle = _half_twiddles(n, sign, e)
    zero = e.const(0.0)

    def pre(ix: list[ir.Value]) -> list[ir.Value]:
        k = ix[r]
        first = arith.cmpi(arith.CmpIPredicate.eq, k, _idx(0))
        ar, ai = _extract(x, ix)
        ai = arith.select(first, zero, ai)
        br, bi = _extract(x, ix[:r] + [arith.subi(_idx(m), k)])
        bi = arith.select(first, zero, arith.negf(bi))  # k = 0 reads X[m]: its imaginary part dropped
        er, ei = arith.addf(ar, br), arith.addf(ai, bi)
        orr, oi = _cmul(arith.subf(ar, br), arith.subf(ai, bi), *twiddle(k))
        return [arith.subf(er, oi), arith.addf(ei, orr)]  # E + i O

    z = _gather(lead + [m], e.type, 2, pre)
    small = _dft_axis((z[0], z[1]), r, sign, e)
    factor = e.const(scale)

    def unpack(ix: list[ir.Value]) -> list[ir.Value]:
        t = ix[r]
        at = ix[:r] + [arith.shrui(t, _idx(1))]
        odd = arith.cmpi(arith.CmpIPredicate.ne, arith.andi(t, _idx(1)), _idx(0))
        value = arith.select(odd, tensor.extract(small[1], at), tensor.extract(small[0], at))
        return [arith.mulf(value, factor)]

    (real,) = _gather(lead + [n], e.type, 1, unpack)
    return real


@lowers("fft")
def lower_fft(v: OpView) -> ir.Value:
    kind = v.attrs["fft_type"]
    lengths = list(v.attrs["fft_length"])
    shape, out = v.shapes["operand"], v.result_shape
    e = Elem(out.element_type.complex_component)
    result_elem = ir.RankedTensorType(v.result_type).element_type
    if out.numel == 0:
        return _empty(out.dimensions, result_elem)
    rank = shape.rank
    axes = list(range(rank - len(lengths), rank))
    inverse = kind in ("IFFT", "IRFFT")
    sign = 1.0 if inverse else -1.0
    scale = 1.0 / math.prod(lengths) if inverse else 1.0
    n_last = lengths[-1] if lengths else 0
    packed = n_last % 2 == 0 and n_last >= PACKED_MIN
    if kind == "RFFT" and packed:
        x = _rfft_last(v.args["operand"], n_last, sign, e)
        for axis in axes[:-1]:
            x = _dft_axis(x, axis, sign, e)
        return _join(x, result_elem, 1.0, e)
    x = _split(v.args["operand"], list(shape.dimensions), e, kind != "RFFT")
    if kind == "IRFFT" and packed:
        for axis in axes[:-1]:
            x = _dft_axis(x, axis, sign, e)
        return _irfft_last(x, n_last, sign, scale, e)
    if kind == "RFFT":
        x = _dft_axis(x, axes[-1], sign, e)
        x = _first_frequencies(x, out.dimensions[-1], e)
        for axis in axes[:-1]:
            x = _dft_axis(x, axis, sign, e)
        return _join(x, result_elem, 1.0, e)
    if kind == "IRFFT":
        for axis in axes[:-1]:
            x = _dft_axis(x, axis, sign, e)
        x = _dft_axis(_mirror_last(x, lengths[-1], e), axes[-1], sign, e)
        (real,) = _generic([x[0]], [_identity(rank)], out.dimensions, e.type, 1,
                           lambda r, *_: [arith.mulf(r, e.const(scale))])
        return real
    for axis in reversed(axes):  # the last axis first: it reads the operand's layout as is
        x = _dft_axis(x, axis, sign, e)
    return _join(x, result_elem, scale, e)
