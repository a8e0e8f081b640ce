"""jax's XLA:CPU symmetric eigendecomposition (`lapack_ssyevd_ffi`, `lapack_dsyevd_ffi`, used by
`jnp.linalg.eigh`), rebuilt from builder ops as cyclic Jacobi rotations: sweeps over every
(p, q) pair until the off-diagonal part is below the type's epsilon relative to the matrix's
norm (at most 30 sweeps), then eigenvalues sorted ascending with their vectors, as LAPACK
returns them. Eigenvalues equal LAPACK's up to rounding; each eigenvector is defined up to its
sign, and its sign may differ from LAPACK's."""

from __future__ import annotations

import numpy as np

from ..builder import XlaBuilder, XlaOp
from ..dialect.element_types import PrimitiveType, dtype_of
from .householder import _Kit, _loop
from .importer import OpContext
from .ops_misc import KNOWN_TARGETS
from .types import Unsupported

MAX_SWEEPS = 30


def syevd(cx: OpContext) -> list[XlaOp]:
    b = cx.b
    a = cx.operands[0]
    *batch, n, n2 = a.shape.dimensions
    et = a.shape.element_type
    if et not in (PrimitiveType.F32, PrimitiveType.F64) or n != n2:
        raise Unsupported(f"eigendecomposition of {a.shape} (real square matrices only)")
    flags = {}
    attr = cx.attr("mhlo.backend_config")
    for named in attr if attr is not None else []:
        try:
            flags[named.name] = chr(int(named.attr.value))
        except (TypeError, ValueError, AttributeError):
            continue
    kit = _Kit(b, tuple(batch), n, n, et)
    nb = kit.nb
    rows, cols = kit.iota(kit.full, nb), kit.iota(kit.full, nb + 1)
    # LAPACK reads one triangle: mirror it.
    lower = flags.get("uplo", "L") == "L"
    keep = b.ge(rows, cols) if lower else b.le(rows, cols)
    tri = b.select(keep, a, kit.fill(0, kit.full))
    strict = b.select(b.eq(rows, cols), kit.fill(0, kit.full), tri)
    sym = b.add(tri, b.transpose(strict, [*range(nb), nb + 1, nb]))
    eye = b.convert_element_type(b.eq(rows, cols), et)
    info = b.broadcast(b.constant(np.int32(0)), list(batch))
    if n > 1:
        sym, eye = _jacobi(b, sym, eye, tuple(batch), n, et)
    # Ascending eigenvalues, each vector column moving with its value (keys repeated per row).
    values = kit.pick(sym, b.eq(rows, cols), nb + 1)                                   # [B, n]
    keys = kit.spread(values, kit.full, [*range(nb), nb + 1])
    sorted_keys, vectors = (b.get_tuple_element(b.sort([keys, eye], None, nb + 1, True), i) for i in (0, 1))
    values = b.reshape(b.slice(sorted_keys, [0] * (nb + 2), [*batch, 1, n]), [*batch, n])
    finite = b.convert_element_type(b.not_(b.is_finite(values)), PrimitiveType.S32)
    info = b.add(info, b.reduce(finite, b.constant(np.int32(0)), lambda p, q: p.builder.max(p, q), [nb]))
    return [vectors, values, info]


def _jacobi(b: XlaBuilder, a: XlaOp, v: XlaOp, batch: tuple[int, ...], n: int,
            et: PrimitiveType) -> tuple[XlaOp, XlaOp]:
    pairs = [(p, q) for p in range(n - 1) for q in range(p + 1, n)]
    p_table = np.array([p for p, _ in pairs], np.int32)
    q_table = np.array([q for _, q in pairs], np.int32)
    eps = float(np.finfo(dtype_of(et)).eps)
    nb = len(batch)

    def off_and_norm(kit: _Kit, a: XlaOp) -> tuple[XlaOp, XlaOp]:
        squares = kit.b.mul(a, a)
        diagonal = kit.b.eq(kit.iota(kit.full, nb), kit.iota(kit.full, nb + 1))
        off = kit.b.select(diagonal, kit.fill(0, kit.full), squares)
        total = kit.sum(kit.sum(squares, nb + 1), nb)
        return kit.sum(kit.sum(off, nb + 1), nb), total

    def rotate(sb: XlaBuilder, t: XlaOp, a: XlaOp, v: XlaOp) -> list[XlaOp]:
        kit = _Kit(sb, batch, n, n, et)
        p = sb.reshape(sb.dynamic_slice(sb.constant(p_table), [t], [1]), [])
        q = sb.reshape(sb.dynamic_slice(sb.constant(q_table), [t], [1]), [])
        rows, cols = kit.iota(kit.full, nb), kit.iota(kit.full, nb + 1)

        def at(i: XlaOp, j: XlaOp) -> XlaOp:     # a[..., i, j]: [B]
            row = kit.pick(a, sb.eq(rows, sb.broadcast(i, kit.full)), nb)
            return kit.pick(row, sb.eq(kit.iota([*batch, n], nb), sb.broadcast(j, [*batch, n])), nb)

        app, aqq, apq = at(p, p), at(q, q), at(p, q)
        zero_b, one_b = kit.fill(0, list(batch)), kit.fill(1, list(batch))
        # Golub & Van Loan's sym.schur2: t = sign(theta) / (|theta| + sqrt(theta^2 + 1)).
        skip = sb.eq(apq, zero_b)
        theta = sb.div(sb.sub(aqq, app), sb.mul(kit.fill(2, list(batch)), sb.select(skip, one_b, apq)))
        sign = sb.select(sb.ge(theta, zero_b), one_b, sb.neg(one_b))
        tan = sb.div(sign, sb.add(sb.abs(theta), sb.sqrt(sb.add(sb.mul(theta, theta), one_b))))
        tan = sb.select(skip, zero_b, tan)
        c = sb.div(one_b, sb.sqrt(sb.add(sb.mul(tan, tan), one_b)))
        s = sb.mul(tan, c)
        cf, sf = kit.spread(c, kit.full, kit.keep), kit.spread(s, kit.full, kit.keep)

        def rotate_rows(x: XlaOp) -> XlaOp:      # J^T x: rows p and q mix
            is_p, is_q = sb.eq(rows, sb.broadcast(p, kit.full)), sb.eq(rows, sb.broadcast(q, kit.full))
            row_p = kit.spread(kit.pick(x, is_p, nb), kit.full, [*kit.keep, nb + 1])
            row_q = kit.spread(kit.pick(x, is_q, nb), kit.full, [*kit.keep, nb + 1])
            new_p = sb.sub(sb.mul(cf, row_p), sb.mul(sf, row_q))
            new_q = sb.add(sb.mul(sf, row_p), sb.mul(cf, row_q))
            return sb.select(is_p, new_p, sb.select(is_q, new_q, x))

        def rotate_cols(x: XlaOp) -> XlaOp:      # x J: columns p and q mix
            is_p, is_q = sb.eq(cols, sb.broadcast(p, kit.full)), sb.eq(cols, sb.broadcast(q, kit.full))
            col_p = kit.spread(kit.pick(x, is_p, nb + 1), kit.full, [*kit.keep, nb])
            col_q = kit.spread(kit.pick(x, is_q, nb + 1), kit.full, [*kit.keep, nb])
            new_p = sb.sub(sb.mul(cf, col_p), sb.mul(sf, col_q))
            new_q = sb.add(sb.mul(sf, col_p), sb.mul(cf, col_q))
            return sb.select(is_p, new_p, sb.select(is_q, new_q, x))

        return [rotate_cols(rotate_rows(a)), rotate_cols(v)]

    def sweep(sb: XlaBuilder, a: XlaOp, v: XlaOp) -> list[XlaOp]:
        """One cyclic sweep; returns (a, v, 1 when every matrix has converged else 0)."""
        a, v = _loop(sb, len(pairs), [a, v], rotate)
        kit = _Kit(sb, batch, n, n, et)
        off, total = off_and_norm(kit, a)
        converged = sb.le(off, sb.mul(total, kit.fill(eps * eps, list(batch))))
        all_done = sb.reduce(sb.convert_element_type(converged, PrimitiveType.S32), sb.constant(np.int32(1)),
                             lambda x, y: x.builder.min(x, y), list(range(nb))) if nb else \
            sb.convert_element_type(converged, PrimitiveType.S32)
        return [a, v, all_done]

    def guarded(sb: XlaBuilder, _: XlaOp, a: XlaOp, v: XlaOp, done: XlaOp) -> list[XlaOp]:
        """A sweep unless converged: the sweeps after convergence cost nothing."""
        operand = sb.tuple([a, v, done])

        def run(t: XlaOp) -> XlaOp:
            tb = t.builder
            return tb.tuple(sweep(tb, tb.get_tuple_element(t, 0), tb.get_tuple_element(t, 1)))

        out = sb.conditional(sb.eq(done, sb.constant(np.int32(0))), [run, lambda t: t], [operand, operand])
        return [sb.get_tuple_element(out, i) for i in range(3)]

    a, v, _ = _loop(b, MAX_SWEEPS, [a, v, b.constant(np.int32(0))], guarded)
    return a, v


KNOWN_TARGETS["lapack_ssyevd_ffi"] = syevd
KNOWN_TARGETS["lapack_dsyevd_ffi"] = syevd
