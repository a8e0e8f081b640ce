"""jax's XLA:CPU custom calls (LAPACK through its FFI), expanded into builder ops.

jax lowers `jnp.linalg.cholesky`, `solve_triangular` and `lu`/`solve` on CPU to the custom
calls `lapack_?potrf_ffi`, `lapack_?trsm_ffi` and `lapack_?getrf_ffi`. Their meaning is
LAPACK's, so they are rebuilt here: potrf as `cholesky`, trsm as `triangular_solve`, getrf as
an unblocked LU with partial pivoting (LAPACK's getf2: the same pivots, chosen by i?amax,
which for complex numbers compares |re| + |im|; rounding of the blocked getrf may differ in
the last bits). `info` is computed as LAPACK defines it: for potrf,
nonzero when the factor is not finite (not positive definite); for getrf, 1 + the first zero
pivot's index.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..builder import XlaBuilder, XlaOp
from ..dialect.element_types import PrimitiveType
from ..dialect.shape import Shape
from .importer import OpContext
from .ops_misc import KNOWN_TARGETS
from .types import Unsupported

S32 = PrimitiveType.S32


def _config(cx: OpContext) -> dict[str, str]:
    """The LAPACK flags of `mhlo.backend_config` (ui8 character codes) as characters."""
    attr = cx.attr("mhlo.backend_config")
    flags = {}
    if attr is not None:
        for named in attr:
            try:
                flags[named.name] = chr(int(named.attr.value))
            except (TypeError, ValueError, AttributeError):
                continue
    return flags


def _zeros_like_batch(b: XlaBuilder, dims: tuple[int, ...]) -> XlaOp:
    return b.broadcast(b.constant(np.int32(0)), list(dims))


def _all_finite(b: XlaBuilder, x: XlaOp, batch: tuple[int, ...]) -> XlaOp:
    """s32 per matrix: 0 when every element of the trailing 2 dims is finite, else 1."""
    rank = x.shape.rank
    finite = b.convert_element_type(b.is_finite(b.real(x) if _is_complex(x) else x), S32)
    worst = b.reduce(finite, b.constant(np.int32(1)), lambda p, q: p.builder.min(p, q),
                     [rank - 2, rank - 1])
    return b.sub(b.broadcast(b.constant(np.int32(1)), list(batch)) if batch else b.constant(np.int32(1)),
                 worst)


def _is_complex(x: XlaOp) -> bool:
    return x.shape.element_type in (PrimitiveType.C64, PrimitiveType.C128)


def potrf(cx: OpContext) -> list[XlaOp]:
    b = cx.b
    a = cx.operands[0]
    lower = _config(cx).get("uplo", "L") == "L"
    factor = b.cholesky(a, lower=lower)
    return [factor, _all_finite(b, factor, a.shape.dimensions[:-2])]


def trsm(cx: OpContext) -> list[XlaOp]:
    flags = _config(cx)
    a, rhs = cx.operands[:2]
    transpose = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}[flags.get("trans_x", "N")]
    return [cx.b.triangular_solve(a, rhs, flags.get("side", "L") == "L", flags.get("uplo", "L") == "L",
                                  flags.get("diag", "N") == "U", transpose)]


def getrf(cx: OpContext) -> list[XlaOp]:
    b = cx.b
    a = cx.operands[0]
    *batch, m, n = a.shape.dimensions
    batch = tuple(batch)
    steps = min(m, n)
    if steps == 0:
        raise Unsupported("LU of an empty matrix")
    state = b.tuple([b.constant(np.int32(0)), a,
                     b.broadcast(b.constant(np.int32(0)), [*batch, steps]),
                     _zeros_like_batch(b, batch) if batch else b.constant(np.int32(0))])
    def more(s: XlaOp) -> XlaOp:
        return s.builder.lt(s.builder.get_tuple_element(s, 0), s.builder.constant(np.int32(steps)))

    out = b.while_(more, lambda s: _lu_step(s.builder, s, batch, m, n, steps), state)
    return [b.get_tuple_element(out, 1), b.get_tuple_element(out, 2), b.get_tuple_element(out, 3)]


def _lu_step(b: XlaBuilder, state: XlaOp, batch: tuple[int, ...], m: int, n: int, steps: int) -> XlaOp:
    k, a, pivots, info = (b.get_tuple_element(state, i) for i in range(4))
    nb = len(batch)
    et = a.shape.element_type
    neg_zero = b.constant(np.array(-0.0).astype(_dtype(et)))
    one = b.constant(np.int32(1))

    def iota(dims: list[int], dim: int) -> XlaOp:
        return b.iota(Shape.array(S32, dims), dim)

    def bcast(x: XlaOp, dims: list[int], mapping: list[int]) -> XlaOp:
        return b.broadcast_in_dim(x, dims, mapping)

    def pick(x: XlaOp, mask: XlaOp, dim: int) -> XlaOp:
        # The one element per row where `mask` holds, summed with -0.0 (exact, sign kept).
        return b.reduce(b.select(mask, x, b.broadcast(neg_zero, list(x.shape.dimensions))), neg_zero,
                        lambda p, q: p.builder.add(p, q), [dim])

    full = [*batch, m, n]
    keep = list(range(nb))
    kb_mn = b.broadcast(k, full)
    rows = iota(full, nb)
    cols = iota(full, nb + 1)
    at_col_k = b.eq(cols, kb_mn)
    col = pick(a, at_col_k, nb + 1)                                    # [B, m]
    rows_m = iota([*batch, m], nb)
    k_m = b.broadcast(k, [*batch, m])
    # LAPACK's i?amax: |x| for real types, |re| + |im| (not the modulus) for complex ones.
    magnitude = b.add(b.abs(b.real(col)), b.abs(b.imag(col))) if _is_complex(col) else b.abs(col)
    mag_type = magnitude.shape.element_type
    candidates = b.select(b.ge(rows_m, k_m), magnitude,
                          b.broadcast(b.constant(np.array(-1).astype(_dtype(mag_type))), [*batch, m]))
    biggest = b.reduce(candidates, b.constant(np.array(-np.inf).astype(_dtype(mag_type))),
                       lambda p, q: p.builder.max(p, q), [nb])
    is_max = b.and_(b.eq(candidates, bcast(biggest, [*batch, m], keep)), b.ge(rows_m, k_m))
    p = b.reduce(b.select(is_max, rows_m, b.broadcast(b.constant(np.int32(m)), [*batch, m])),
                 b.constant(np.int32(m)), lambda x, y: x.builder.min(x, y), [nb])   # [B]
    k_b = b.broadcast(k, list(batch)) if batch else k
    p = b.select(b.eq(p, b.broadcast(b.constant(np.int32(m)), list(batch)) if batch else
                      b.constant(np.int32(m))), k_b, p)                  # all NaN: no swap
    p_mn = bcast(p, full, keep)
    row_k = pick(a, b.eq(rows, kb_mn), nb)                              # [B, n]
    row_p = pick(a, b.eq(rows, p_mn), nb)
    a = b.select(b.eq(rows, kb_mn), bcast(row_p, full, [*keep, nb + 1]),
                 b.select(b.eq(rows, p_mn), bcast(row_k, full, [*keep, nb + 1]), a))
    cols_n = iota([*batch, n], nb)
    d = pick(row_p, b.eq(cols_n, b.broadcast(k, [*batch, n])), nb)      # the pivot [B]
    col = pick(a, at_col_k, nb + 1)
    zero_d = b.eq(d, b.broadcast(b.constant(np.array(0).astype(_dtype(et))), list(batch)) if batch
                  else b.constant(np.array(0).astype(_dtype(et))))
    below = b.gt(rows_m, k_m)
    scaled = b.div(col, bcast(d, [*batch, m], keep))
    zeros_m = b.broadcast(b.constant(np.array(0).astype(_dtype(et))), [*batch, m])
    l_col = b.select(b.and_(below, b.not_(bcast(zero_d, [*batch, m], keep))), scaled, zeros_m)
    update = b.mul(bcast(l_col, full, [*keep, nb]), bcast(row_p, full, [*keep, nb + 1]))
    trailing = b.and_(b.gt(rows, kb_mn), b.gt(cols, kb_mn))
    a = b.select(trailing, b.sub(a, update), a)
    a = b.select(b.and_(b.gt(rows, kb_mn), at_col_k),
                 b.select(bcast(zero_d, full, keep), a, bcast(l_col, full, [*keep, nb])), a)
    steps_iota = iota([*batch, steps], nb)
    pivots = b.select(b.eq(steps_iota, b.broadcast(k, [*batch, steps])),
                      bcast(b.add(p, b.broadcast(one, list(batch))), [*batch, steps], keep), pivots)
    first_zero = b.and_(zero_d, b.eq(info, b.broadcast(b.constant(np.int32(0)), list(batch)) if batch
                                     else b.constant(np.int32(0))))
    info = b.select(first_zero, b.add(k_b, b.broadcast(one, list(batch))), info)
    return b.tuple([b.add(k, one), a, pivots, info])


def _dtype(t: PrimitiveType) -> Any:
    import xlamlir as xm

    return xm.dtype_of(t)


for _prefix in "sdcz":
    KNOWN_TARGETS[f"lapack_{_prefix}potrf_ffi"] = potrf
    KNOWN_TARGETS[f"lapack_{_prefix}trsm_ffi"] = trsm
    KNOWN_TARGETS[f"lapack_{_prefix}getrf_ffi"] = getrf
