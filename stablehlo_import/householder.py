"""jax's XLA:CPU QR custom calls, `lapack_?geqrf_ffi` and `lapack_?orgqr_ffi` /
`lapack_?ungqr_ffi`, rebuilt from builder ops with LAPACK's unblocked algorithms (geqr2,
org2r): the same Householder reflectors and signs, so `jnp.linalg.qr` gives LAPACK's Q and R
up to rounding."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..builder import XlaBuilder, XlaOp
from ..dialect.element_types import PrimitiveType, dtype_of
from ..dialect.shape import Shape
from .importer import OpContext
from .ops_misc import KNOWN_TARGETS

S32 = PrimitiveType.S32
_COMPLEX = (PrimitiveType.C64, PrimitiveType.C128)


class _Kit:
    """Masks and reductions over a batch of m x n matrices inside one loop body."""

    def __init__(self, b: XlaBuilder, batch: tuple[int, ...], m: int, n: int, et: PrimitiveType) -> None:
        self.b, self.batch, self.m, self.n, self.et = b, list(batch), m, n, et
        self.nb = len(batch)
        self.keep = list(range(self.nb))
        self.full = [*batch, m, n]
        self.complex = et in _COMPLEX

    def const(self, value: Any, et: PrimitiveType | None = None) -> XlaOp:
        return self.b.constant(np.array(value).astype(dtype_of(et or self.et)))

    def fill(self, value: Any, dims: list[int], et: PrimitiveType | None = None) -> XlaOp:
        return self.b.broadcast(self.const(value, et), dims)

    def iota(self, dims: list[int], dim: int) -> XlaOp:
        return self.b.iota(Shape.array(S32, dims), dim)

    def spread(self, x: XlaOp, dims: list[int], mapping: list[int]) -> XlaOp:
        return self.b.broadcast_in_dim(x, dims, mapping)

    def sum(self, x: XlaOp, dim: int) -> XlaOp:
        zero = self.const(0, x.shape.element_type)
        return self.b.reduce(x, zero, lambda p, q: p.builder.add(p, q), [dim])

    def pick(self, x: XlaOp, mask: XlaOp, dim: int) -> XlaOp:
        """The one element along `dim` where `mask` holds (summed with -0.0: exact)."""
        et = x.shape.element_type
        neg_zero = self.const(-0.0, et)
        masked = self.b.select(mask, x, self.b.broadcast(neg_zero, list(x.shape.dimensions)))
        return self.b.reduce(masked, neg_zero, lambda p, q: p.builder.add(p, q), [dim])

    def conj(self, x: XlaOp) -> XlaOp:
        if not self.complex:
            return x
        return self.b.complex(self.b.real(x), self.b.neg(self.b.imag(x)))

    def column(self, a: XlaOp, k: XlaOp) -> XlaOp:
        """Column k of each matrix: [B, m]."""
        return self.pick(a, self.b.eq(self.iota(self.full, self.nb + 1), self.b.broadcast(k, self.full)),
                         self.nb + 1)

    def reflector(self, col: XlaOp, k: XlaOp) -> XlaOp:
        """v with v[k] = 1, the stored vector below k and zeros above: [B, m]."""
        b = self.b
        rows = self.iota([*self.batch, self.m], self.nb)
        km = b.broadcast(k, [*self.batch, self.m])
        zeros, ones = self.fill(0, [*self.batch, self.m]), self.fill(1, [*self.batch, self.m])
        return b.select(b.gt(rows, km), col, b.select(b.eq(rows, km), ones, zeros))

    def apply(self, a: XlaOp, v: XlaOp, tau: XlaOp, cols_from: XlaOp | None) -> XlaOp:
        """a - tau v (v^H a), on the columns >= `cols_from` only (all when None)."""
        b, nb = self.b, self.nb
        w = self.sum(b.mul(self.spread(self.conj(v), self.full, [*self.keep, nb]), a), nb)   # [B, n]
        tau_v = b.mul(self.spread(tau, self.full, self.keep), self.spread(v, self.full, [*self.keep, nb]))
        update = b.mul(tau_v, self.spread(w, self.full, [*self.keep, nb + 1]))
        if cols_from is None:
            return b.sub(a, update)
        cols = self.iota(self.full, nb + 1)
        return b.select(b.ge(cols, b.broadcast(cols_from, self.full)), b.sub(a, update), a)


def _loop(b: XlaBuilder, steps: int, state: list[XlaOp], body: Any) -> list[XlaOp]:
    """for k in range(steps): state = body(k, *state), as a while_ loop."""
    init = b.tuple([b.constant(np.int32(0)), *state])

    def condition(s: XlaOp) -> XlaOp:
        return s.builder.lt(s.builder.get_tuple_element(s, 0), s.builder.constant(np.int32(steps)))

    def step(s: XlaOp) -> XlaOp:
        sb = s.builder
        k = sb.get_tuple_element(s, 0)
        values = body(sb, k, *[sb.get_tuple_element(s, i + 1) for i in range(len(state))])
        return sb.tuple([sb.add(k, sb.constant(np.int32(1))), *values])

    out = b.while_(condition, step, init)
    return [b.get_tuple_element(out, i + 1) for i in range(len(state))]


def geqrf(cx: OpContext) -> list[XlaOp]:
    a = cx.operands[0]
    *batch, m, n = a.shape.dimensions
    steps = min(m, n)
    et = a.shape.element_type
    taus = cx.b.broadcast(cx.b.constant(np.array(0).astype(dtype_of(et))), [*batch, steps])
    if steps == 0:
        return [a, taus]

    def body(b: XlaBuilder, k: XlaOp, a: XlaOp, taus: XlaOp) -> list[XlaOp]:
        kit = _Kit(b, tuple(batch), m, n, et)
        nb, bm = kit.nb, [*batch, m]
        col = kit.column(a, k)
        rows = kit.iota(bm, nb)
        below = b.gt(rows, b.broadcast(k, bm))
        x = b.select(below, col, kit.fill(0, bm))
        alpha = kit.pick(col, b.eq(rows, b.broadcast(k, bm)), nb)                       # [B]
        magnitude = b.abs(x)
        xnorm2 = kit.sum(b.mul(magnitude, magnitude), nb)                                 # real [B]
        real_t = xnorm2.shape.element_type
        alphr = b.real(alpha) if kit.complex else alpha
        alphi = b.imag(alpha) if kit.complex else kit.fill(0, list(batch), real_t)
        norm = b.sqrt(b.add(b.add(b.mul(alphr, alphr), b.mul(alphi, alphi)), xnorm2))
        # beta = -sign(alphr) * norm (LAPACK's larfg).
        beta = b.select(b.ge(alphr, kit.fill(0, list(batch), real_t)), b.neg(norm), norm)
        trivial = b.and_(b.eq(xnorm2, kit.fill(0, list(batch), real_t)),
                         b.eq(alphi, kit.fill(0, list(batch), real_t)))
        beta_t = b.complex(beta, kit.fill(0, list(batch), real_t)) if kit.complex else beta
        tau = b.div(b.sub(beta_t, alpha), beta_t)
        tau = b.select(trivial, kit.fill(0, list(batch)), tau)
        scale = b.div(kit.fill(1, list(batch)), b.sub(alpha, beta_t))
        v = kit.reflector(b.mul(col, kit.spread(scale, bm, kit.keep)), k)
        v = b.select(kit.spread(trivial, bm, kit.keep), kit.reflector(kit.fill(0, bm), k), v)
        # H^H = I - conj(tau) v v^H on the columns right of k (zgeqr2); tau is real for real types.
        a = kit.apply(a, v, kit.conj(tau), b.add(k, b.constant(np.int32(1))))
        rows_f, cols_f = kit.iota(kit.full, nb), kit.iota(kit.full, nb + 1)
        kf = b.broadcast(k, kit.full)
        at_k = b.and_(b.eq(cols_f, kf), b.not_(kit.spread(trivial, kit.full, kit.keep)))
        new_col = b.select(b.eq(rows_f, kf), kit.spread(beta_t, kit.full, kit.keep),
                           kit.spread(v, kit.full, [*kit.keep, nb]))
        a = b.select(b.and_(at_k, b.ge(rows_f, kf)), new_col, a)
        steps_i = kit.iota([*batch, steps], nb)
        taus = b.select(b.eq(steps_i, b.broadcast(k, [*batch, steps])),
                        kit.spread(tau, [*batch, steps], kit.keep), taus)
        return [a, taus]

    return _loop(cx.b, steps, [a, taus], body)


def orgqr(cx: OpContext) -> list[XlaOp]:
    a, taus = cx.operands
    *batch, m, n = a.shape.dimensions
    steps = taus.shape.dimensions[-1]
    et = a.shape.element_type
    b = cx.b
    eye = b.convert_element_type(b.eq(b.iota(Shape.array(S32, [*batch, m, n]), len(batch)),
                                      b.iota(Shape.array(S32, [*batch, m, n]), len(batch) + 1)), et)
    if steps == 0:
        return [eye]

    def body(b: XlaBuilder, j: XlaOp, q: XlaOp, a: XlaOp, taus: XlaOp) -> list[XlaOp]:
        # Q = H(0) H(1) ... H(k-1) I: apply H(i) = I - tau v v^H for i = k-1 down to 0.
        kit = _Kit(b, tuple(batch), m, n, et)
        i = b.sub(b.constant(np.int32(steps - 1)), j)
        v = kit.reflector(kit.column(a, i), i)
        tau = kit.pick(taus, b.eq(kit.iota([*batch, steps], kit.nb), b.broadcast(i, [*batch, steps])), kit.nb)
        return [kit.apply(q, v, tau, None), a, taus]

    return [_loop(b, steps, [eye, a, taus], body)[0]]


for _prefix in "sdcz":
    KNOWN_TARGETS[f"lapack_{_prefix}geqrf_ffi"] = geqrf
for _name in ("sorgqr", "dorgqr", "cungqr", "zungqr"):
    KNOWN_TARGETS[f"lapack_{_name}_ffi"] = orgqr
