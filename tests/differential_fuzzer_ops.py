"""The differential fuzzer's structured op families, a mixin of differential_fuzzer.Generator.

Indexing (gather, scatter incl. variadic and out-of-bounds windows), sort (multi-operand,
stable and unstable), control flow (while, conditional, call, composite_call, map, scan), windows
(reduce_window, select_and_scatter, convolution with groups, padding and dilations),
variadic reduce and reduce_window, fft, cholesky / triangular_solve, batch norm
(training, inference, grad), bitcasts, reduce_precision, top_k, rng_bit_generator,
collectives on one replica, Python custom calls, nested loops, and `g_twin`: two
in-place ops (scatter, dynamic_update_slice, sort, while, dynamic_slice) on one shared
operand, or on two structurally identical broadcast constants, both returned, sometimes
beside the operand itself (the class of the two-scatters bug).

Only programs whose result the semantics determine are drawn: unstable sorts compare
all operands lexicographically in the total order (equivalent elements are then
identical), select_and_scatter operands have distinct values (no ties), scatter with
"replace" has a single window, cholesky's unread triangle is masked with a select.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

import xlamlir as xm

BOOL = np.dtype(np.bool_)
WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))  # fft, linear algebra, batch norm
INDEX_TYPES = [np.dtype(np.int32), np.dtype(np.int64)]
INF = math.inf
EXACT_LIMIT = 2.0**20


def _identity(kind: str, dt: np.dtype) -> np.ndarray:
    if dt == BOOL:
        return np.array(kind in ("and", "min", "mul"))
    if kind == "add":
        return np.zeros((), dt)
    if kind == "mul":
        return np.ones((), dt)
    if dt.kind == "f":
        return np.array(-np.inf if kind == "max" else np.inf, dt)
    info = np.iinfo(dt)
    return np.array(info.min if kind == "max" else info.max, dt)


def _combine(kind: str):
    def fn(a: xm.XlaOp, c: xm.XlaOp) -> xm.XlaOp:
        sb = a.builder
        return {"add": sb.add, "mul": sb.mul, "max": sb.max, "min": sb.min, "and": sb.and_,
                "or": sb.or_, "replace": lambda u, w: w}[kind](a, c)
    return fn


def b_xor(p: xm.XlaOp, q: xm.XlaOp) -> xm.XlaOp:
    return p.builder.xor(p, q)


def _window_out(size: int, window: int, stride: int, lo: int, hi: int, base_dil: int = 1,
                win_dil: int = 1) -> int:
    base = (size - 1) * base_dil + 1 if size else 0
    padded = base + lo + hi
    extent = (window - 1) * win_dil + 1
    return (padded - extent) // stride + 1 if padded >= extent else 0


def _twice_plus_one(x: np.ndarray) -> np.ndarray:
    if x.dtype == BOOL:
        return ~x
    with np.errstate(all="ignore"):
        return (x + x + x.dtype.type(1)).astype(x.dtype)


def _pair(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return x, (x ^ y if x.dtype == BOOL else (x + y).astype(x.dtype))


# Python custom-call targets, registered with the library and given to the interpreter. The
# identity returns its argument itself, and the pair returns one of its arguments: results
# that are input buffers.
CUSTOM_CALLS = {"fuzz_twice_plus_one": _twice_plus_one, "fuzz_identity": lambda x: x,
                "fuzz_pair": _pair}
for _name, _fn in CUSTOM_CALLS.items():
    xm.register_custom_call(_name, _fn)


class StructuredOps:
    """Generators g_* of the structured families; see the module docstring."""

    src: Any
    b: xm.XlaBuilder
    rng: np.random.Generator
    args: list
    trace: list
    wanted: list

    # ---- helpers ------------------------------------------------------------------------------

    def perm(self, n: int) -> list[int]:
        p = list(range(n))
        for k in range(n - 1, 0, -1):
            j = self.src.integer(0, k)
            p[k], p[j] = p[j], p[k]
        return p

    def array_input(self, values: np.ndarray, what: str) -> xm.XlaOp:
        """A parameter or a constant holding `values` (indices, masks)."""
        if self.src.chance(0.5):
            op = self.b.parameter(len(self.args), xm.Shape.array(values.dtype, values.shape))
            self.args.append(values)
            self.trace.append(f"p{len(self.args) - 1} = {what} {values.tolist()}")
        else:
            op = self.b.constant(values)
            self.trace.append(f"constant {what} {values.tolist()}")
        return op

    def numeric(self, v: Any) -> bool:
        return v.dtype != BOOL

    # ---- indexing -----------------------------------------------------------------------------

    def g_gather(self) -> Any:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        r, dims = x.op.shape.rank, x.dims
        k = self.src.integer(1, r)
        smap = self.perm(r)[:k]
        collapsed = sorted(d for d in smap if dims[d] >= 1 and self.src.chance(0.5))
        sizes = [1 if d in collapsed else self.src.integer(min(1, dims[d]), dims[d])
                 for d in range(r)]
        batch = [self.src.integer(1, 3)] + ([self.src.integer(1, 2)] if self.src.chance(0.2) else [])
        idx = np.stack([self.rng.integers(-2, dims[d] + 3, batch) for d in smap], -1)
        ivd = len(batch)
        if k == 1 and self.src.chance(0.3):
            idx = idx[..., 0]
        elif self.src.chance(0.3):
            idx, ivd = np.moveaxis(idx, -1, 0), 0
        noff = r - len(collapsed)
        offset = list(range(noff)) if self.src.chance(0.3) else list(range(len(batch), len(batch) + noff))
        dn = xm.GatherDimensionNumbers(offset_dims=offset, collapsed_slice_dims=collapsed,
                                       start_index_map=smap, index_vector_dim=ivd)
        indices = self.array_input(idx.astype(self.src.choice(INDEX_TYPES)), "gather indices")
        op = self.b.gather(x.op, indices, dn, sizes)
        return self.add(op, x.bound, x.exact, f"gather {dn} sizes={sizes}")

    def scatter_on(self, xs: list, kind: str | None = None) -> list:
        """scatter into the operands `xs` (same dims); one result Value per operand."""
        x = xs[0]
        r, dims = x.op.shape.rank, x.dims
        k = self.src.integer(1, r)
        order = self.perm(r)[:k]
        inserted = sorted(d for d in order if dims[d] >= 1 and self.src.chance(0.6))
        window = [1 if d in inserted else self.src.integer(min(1, dims[d]), dims[d]) for d in range(r)]
        positions = [self.src.integer(1, 3)] + ([self.src.integer(1, 2)] if self.src.chance(0.2) else [])
        nwin = [window[d] for d in range(r) if d not in inserted]
        if self.src.chance(0.3):
            update_shape, uwd = nwin + positions, list(range(len(nwin)))
        else:
            update_shape, uwd = positions + nwin, list(range(len(positions), len(positions) + len(nwin)))
        # Starts from -1 to one past the last fitting one: some windows are skipped.
        idx = np.stack([self.rng.integers(-1, dims[d] - window[d] + 2, positions) for d in order], -1)
        ivd = len(positions)
        if k == 1 and self.src.chance(0.3):
            idx = idx[..., 0]
        elif self.src.chance(0.3):
            idx, ivd = np.moveaxis(idx, -1, 0), 0
        count = math.prod(positions)
        kinds = []
        for v in xs:
            if kind is not None and (kind != "replace" or count == 1):
                kinds.append(kind)
            elif v.dtype == BOOL:
                kinds.append(self.src.choice(["or", "and"]))
            else:
                single = ["replace"] if count == 1 else []  # one window: order cannot matter
                kinds.append(self.src.choice(["add", "add", "max", "min"] + single))
        updates = [self.new_input(v.dtype, update_shape) for v in xs]
        dn = xm.ScatterDimensionNumbers(update_window_dims=uwd, inserted_window_dims=inserted,
                                        scatter_dims_to_operand_dims=order, index_vector_dim=ivd)
        indices = self.array_input(idx.astype(self.src.choice(INDEX_TYPES)), "scatter indices")
        n = len(xs)

        def combiner(*ps: xm.XlaOp) -> Any:
            outs = [_combine(kd)(ps[i], ps[n + i]) for i, kd in enumerate(kinds)]
            return outs if n > 1 else outs[0]

        res = self.b.scatter([v.op for v in xs] if n > 1 else xs[0].op, indices,
                             [u.op for u in updates] if n > 1 else updates[0].op, combiner, dn)
        outs = [self.b.get_tuple_element(res, i) for i in range(n)] if n > 1 else [res]
        values = []
        for v, u, kd, op in zip(xs, updates, kinds, outs):
            bound = v.bound + count * u.bound if kd == "add" else max(v.bound, u.bound)
            if v.dtype.kind in "iu" and bound >= min(np.iinfo(v.dtype).max, 2**31):
                bound = INF
            values.append(self.add(op, bound, v.exact and u.exact, f"scatter {kd} {dn}"))
        return values

    def g_scatter(self) -> Any:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        xs = [x]
        if self.src.chance(0.1):  # one value as both operands
            xs.append(x)
        elif self.src.chance(0.25):  # variadic: a second operand of the same dims, any type
            xs.append(self.partner(x) if self.src.chance(0.5) else
                      self.new_input(self.src.choice([np.dtype(np.float32), np.dtype(np.int32), BOOL]),
                                     x.dims))
        return self.scatter_on(xs)[-1]

    def dus_on(self, x: Any) -> Any:
        starts = [self.b.constant(np.int32(self.src.integer(-2, d + 1))) if self.src.chance(0.5)
                  else self.array_input(np.array(self.src.integer(-2, d + 1), np.int32), "start")
                  for d in x.dims]
        sizes = [self.src.integer(0, d) for d in x.dims]
        if self.src.chance(0.3):  # the update is a piece of the operand itself (overlap in place)
            piece = self.b.slice(x.op, [0] * len(sizes), sizes) if sizes else x.op
            if sizes and self.src.chance(0.5):
                piece = self.b.rev(piece, list(range(len(sizes))))
            u = self.add(piece, x.bound, x.exact, f"slice of the operand {sizes}")
        else:
            u = self.new_input(x.dtype, sizes)
        return self.add(self.b.dynamic_update_slice(x.op, u.op, starts), max(x.bound, u.bound),
                        x.exact and u.exact, "dynamic_update_slice")

    # ---- sort ---------------------------------------------------------------------------------

    def sort_on(self, xs: list) -> list:
        x = xs[0]
        dim = self.src.integer(0, x.op.shape.rank - 1)
        n = len(xs)
        orderable = x.dtype.kind != "f" or x.exact       # no NaN: a strict weak order on its own
        stable = orderable and self.src.chance(0.5)
        if orderable and n > 1 and not stable and self.src.chance(0.4):
            return self.sort_ties(xs, dim)
        if stable:
            direction = self.src.choice(["LT", "GT", None])
            comparator = None if direction is None else (
                lambda *ps: ps[0].builder.compare(ps[0], ps[1], direction))
            what = f"stable by the first operand {direction or 'default'}"
        else:
            # Lexicographic over every operand in the total order: elements the comparator
            # cannot tell apart are bit-identical, so an unstable sort is determined.
            def comparator(*ps: xm.XlaOp) -> xm.XlaOp:
                sb = ps[0].builder

                def lt(a: xm.XlaOp, c: xm.XlaOp) -> xm.XlaOp:
                    if a.shape.dtype.kind == "f":
                        return sb.compare(a, c, "LT", "TOTALORDER")
                    return sb.lt(a, c)
                result = None
                for i in reversed(range(n)):
                    a, c = ps[2 * i], ps[2 * i + 1]
                    less = lt(a, c)
                    later = None if result is None else sb.and_(sb.not_(lt(c, a)), result)
                    result = less if later is None else sb.or_(less, later)
                return result
            what = "unstable, lexicographic total order"
        res = self.b.sort([v.op for v in xs] if n > 1 else x.op, comparator, dim, is_stable=stable)
        outs = [self.b.get_tuple_element(res, i) for i in range(n)] if n > 1 else [res]
        return [self.add(op, v.bound, v.exact, f"sort dim {dim} {what}") for v, op in zip(xs, outs)]

    def sort_ties(self, xs: list, dim: int) -> list:
        """An unstable sort by the first operand only: the keys are determined, the other
        operands only up to the order within runs of equal keys (returned, compared so)."""
        direction = self.src.choice(["LT", "GT"])
        n = len(xs)
        res = self.b.sort([v.op for v in xs], lambda *ps: ps[0].builder.compare(ps[0], ps[1], direction),
                          dim, is_stable=False)
        key = self.add(self.b.get_tuple_element(res, 0), xs[0].bound, xs[0].exact,
                       f"sort dim {dim} unstable by the first operand {direction}")
        self.wanted.append(key)
        for i in range(1, n):
            v = xs[i]
            tied = type(key)(self.b.get_tuple_element(res, i), v.bound, v.exact, key, dim)
            self.trace.append(f"  operand {i} of that sort, order within equal keys open")
            self.wanted.append(tied)
        return [key]

    def g_sort(self) -> Any:
        # Only exact floats: the comparators order by every operand, and an inexact key's
        # rounding (the sign of an fft round trip's zero, seed 500530) would reorder the
        # exact operands, which have no tolerance.
        x = self.pick(lambda v: v.op.shape.rank >= 1 and (v.dtype.kind != "f" or v.exact))
        if x is None:
            return self.g_unary()
        xs = [x]
        for _ in range(self.src.integer(0, 2)):
            if self.src.chance(0.15):  # one value as two operands
                xs.append(x)
                continue
            partner = self.partner(x)
            if self.src.chance(0.5) and (partner.dtype.kind != "f" or partner.exact):
                xs.append(partner)
                continue
            xs.append(self.new_input(self.src.choice([np.dtype(np.float32), np.dtype(np.int32),
                                                      np.dtype(np.uint8), BOOL]), x.dims))
        return self.src.choice(self.sort_on(xs))

    def g_top_k(self) -> Any:
        """top_k: a stable sort by the total order underneath; ties go to the lower index."""
        # Exact keys only: the indices of inexact ones would follow their rounding.
        x = self.pick(lambda v: v.op.shape.rank >= 1 and v.dtype != BOOL
                      and (v.dtype.kind != "f" or v.exact))
        if x is None:
            return self.g_sort()
        k = self.src.integer(0, x.dims[-1])
        largest = self.src.chance(0.6)
        res = self.b.top_k(x.op, k, largest)
        self.add(self.b.get_tuple_element(res, 1), x.dims[-1], True, f"top_k {k} indices")
        return self.add(self.b.get_tuple_element(res, 0), x.bound, x.exact,
                        f"top_k {k} largest={largest}")

    # ---- control flow -------------------------------------------------------------------------

    def while_on(self, x: Any) -> Any:
        trips = self.src.integer(0, 3)
        if self.src.chance(0.25):
            return self.swapping_while(x)
        kind = self.src.choice(["add", "dus", "scatter"] if x.op.shape.rank else ["add", "dus"])
        if 0 in x.dims:
            kind = "add"  # no [1, ...] update fits
        dt, r = x.dtype, x.op.shape.rank
        step = np.array(self.src.integer(1, 3), dt) if dt != BOOL else np.array(True)
        fill = self.data(dt, ())[0]

        def cond(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            return sb.lt(sb.get_tuple_element(s, 0), sb.constant(np.int32(trips)))

        def body(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            i, v = sb.get_tuple_element(s, 0), sb.get_tuple_element(s, 1)
            if kind == "add":
                v = sb.xor(v, sb.constant(step)) if dt == BOOL else sb.add(v, sb.constant(step))
            elif kind == "dus":  # writes at the trip counter, in the carried buffer
                v = sb.dynamic_update_slice(v, sb.broadcast(sb.constant(fill), [1] * r), [i] * r)
            else:
                upd = sb.broadcast(sb.constant(fill), [1] + list(v.shape.dimensions[1:]))
                dn = xm.ScatterDimensionNumbers(update_window_dims=tuple(range(1, r)),
                                                inserted_window_dims=(0,),
                                                scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
                v = sb.scatter(v, sb.reshape(i, [1, 1]), upd,
                               _combine("or" if dt == BOOL else "add"), dn)
            return sb.tuple([sb.add(i, sb.constant(np.int32(1))), v])

        loop = self.b.while_(cond, body, self.b.tuple([self.b.constant(np.int32(0)), x.op]))
        out = self.b.get_tuple_element(loop, 1)
        fb = float(np.abs(fill.astype(np.float64))) if dt != BOOL else 1.0
        if kind == "dus":
            bound = max(x.bound, fb)
        else:
            bound = x.bound + trips * (float(step) if kind == "add" else fb)
        if dt.kind in "iu" and bound >= min(np.iinfo(dt).max, 2**31):
            bound = INF
        if self.src.chance(0.3):
            self.wanted.append(self.add(self.b.get_tuple_element(loop, 0), trips, True, "while counter"))
        return self.add(out, bound, x.exact, f"while {kind} x{trips}")

    def swapping_while(self, x: Any) -> Any:
        """State (i, a, b) starting as (0, x, x), one value twice; each trip (i + 1, b, a + k):
        the two carried buffers trade places."""
        trips = self.src.integer(0, 4)
        dt = x.dtype
        step = np.array(True) if dt == BOOL else np.array(self.src.integer(1, 3), dt)

        def cond(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            return sb.lt(sb.get_tuple_element(s, 0), sb.constant(np.int32(trips)))

        def body(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            i, a, c = (sb.get_tuple_element(s, k) for k in range(3))
            bumped = sb.xor(a, sb.constant(step)) if dt == BOOL else sb.add(a, sb.constant(step))
            return sb.tuple([sb.add(i, sb.constant(np.int32(1))), c, bumped])

        b = self.b
        loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), x.op, x.op]))
        bound = x.bound + trips * float(step)
        if dt.kind in "iu" and bound >= min(np.iinfo(dt).max, 2**31):
            bound = INF
        self.wanted.append(self.add(b.get_tuple_element(loop, 2), bound, x.exact, "swapping while b"))
        return self.add(b.get_tuple_element(loop, 1), bound, x.exact, f"swapping while x{trips}")

    def g_while(self) -> Any:
        x = self.pick()
        if self.src.chance(0.7) or x.dtype == BOOL:
            return self.while_on(x)
        return self.nested_while(x)

    def nested_while(self, x: Any) -> Any:
        """Two nested counted loops; the inner one adds the outer counter to the value, and
        the outer state carries the value twice (one copy updated, one kept)."""
        outer, inner = self.src.integer(0, 3), self.src.integer(0, 2)
        dt = x.dtype

        def counted(trips: int):
            return lambda s: s.builder.lt(s.builder.get_tuple_element(s, 0),
                                          s.builder.constant(np.int32(trips)))

        def inner_body(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            j, v, step = (sb.get_tuple_element(s, k) for k in range(3))
            return sb.tuple([sb.add(j, sb.constant(np.int32(1))),
                             sb.add(v, sb.broadcast(sb.convert_element_type(step, dt),
                                                    list(v.shape.dimensions))), step])

        def outer_body(s: xm.XlaOp) -> xm.XlaOp:
            sb = s.builder
            i, v, kept = (sb.get_tuple_element(s, k) for k in range(3))
            loop = sb.while_(counted(inner), inner_body,
                             sb.tuple([sb.constant(np.int32(0)), v, i]))
            return sb.tuple([sb.add(i, sb.constant(np.int32(1))), sb.get_tuple_element(loop, 1), kept])

        b = self.b
        loop = b.while_(counted(outer), outer_body, b.tuple([b.constant(np.int32(0)), x.op, x.op]))
        bound = x.bound + outer * inner * outer
        if dt.kind in "iu" and bound >= min(np.iinfo(dt).max, 2**31):
            bound = INF
        self.wanted.append(self.add(b.get_tuple_element(loop, 2), x.bound, x.exact, "while kept"))
        return self.add(b.get_tuple_element(loop, 1), bound, x.exact,
                        f"nested while x{outer} (inner x{inner})")

    def g_conditional(self) -> Any:
        x = self.pick()
        y = x if self.src.chance(0.4) else self.partner(x)
        r = x.op.shape.rank
        branches = [("identity", lambda p: p), ("add self", lambda p: p.builder.add(p, p)),
                    ("max self", lambda p: p.builder.max(p, p))]
        if r:
            branches.append(("rev", lambda p: p.builder.rev(p, list(range(r)))))
        n = self.src.integer(2, 3)
        chosen = [self.src.choice(branches) for _ in range(n)]
        if self.src.chance(0.3):
            index = self.array_input(np.array(self.src.chance(0.5)), "branch pred")
            chosen = chosen[:2]
        else:
            index = self.array_input(np.array(self.src.integer(-1, n + 1), np.int32), "branch index")
        operands = [self.src.choice([x, y]) for _ in chosen]
        op = self.b.conditional(index, [f for _, f in chosen], [v.op for v in operands])
        bound = 2 * max(x.bound, y.bound)
        return self.add(op, bound, x.exact and y.exact, f"conditional {[w for w, _ in chosen]}")

    def g_call(self) -> Any:
        x = self.pick()
        y = x if self.src.chance(0.3) else self.partner(x)
        dt = x.dtype

        def fn(p: xm.XlaOp, q: xm.XlaOp) -> xm.XlaOp:
            sb = p.builder
            if dt == BOOL:
                return sb.or_(sb.and_(p, q), p)
            inner = sb.call(lambda a, c: a.builder.max(a, c), [p, q])  # nested twice
            return sb.add(inner, p)

        op = self.b.call(fn, [x.op, y.op])
        return self.add(op, x.bound + max(x.bound, y.bound), x.exact and y.exact, "call(max + p)")

    def g_composite_call(self) -> Any:
        x = self.pick()
        y = x if self.src.chance(0.3) else self.partner(x)
        b = self.b
        if x.dtype == BOOL:
            op = b.composite_call(lambda p, q: p.builder.or_(p, q), [x.op, y.op], "fuzz.or")
            return self.add(op, 1, True, "composite_call fuzz.or")
        op = b.composite_call(lambda p, q: p.builder.max(p, q) + p, [x.op, y.op], "fuzz.max_plus",
                              "{k = 1 : i32}", self.src.integer(0, 3))
        return self.add(op, x.bound + max(x.bound, y.bound), x.exact and y.exact,
                        "composite_call fuzz.max_plus")

    def g_scan(self) -> Any:
        """A running sum (xor for pred) along one dimension, forward or reversed, as the output
        and the carry; the carry is also returned."""
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return None
        b = self.b
        dims = x.dims
        dim = self.src.integer(0, len(dims) - 1)
        element = dims[:dim] + dims[dim + 1:]
        init = self.pick(lambda v: v.dims == element and v.dtype == x.dtype)
        if init is None or self.src.chance(0.3):
            init = self.new_input(x.dtype, element)
        reverse = self.src.chance(0.5)
        associative = self.src.choice([None, True, False])
        if x.dtype == BOOL:
            result = b.scan(x.op, init.op, lambda e, c: (b_xor(e, c),) * 2, dim, reverse,
                            associative)
            bound, exact, what = 1, True, "xor"
        else:
            result = b.scan(x.op, init.op, lambda e, c: (c + e,) * 2, dim, reverse, associative)
            bound = init.bound + dims[dim] * x.bound
            if x.dtype.kind in "iu" and bound >= min(np.iinfo(x.dtype).max, 2**31):
                bound = INF
            exact, what = x.exact and init.exact, "sum"
        direction = " reversed" if reverse else ""
        self.wanted.append(self.add(b.get_tuple_element(result, 1), bound, exact,
                                    f"scan {what} carry"))
        return self.add(b.get_tuple_element(result, 0), bound, exact,
                        f"scan {what} along {dim}{direction} (is_associative={associative})")

    def g_map(self) -> Any:
        x = self.pick()
        y = self.partner(x)
        if x.dtype == BOOL:
            op = self.b.map([x.op, y.op], lambda a, c: a.builder.xor(a, c))
            return self.add(op, 1, True, "map xor")
        op = self.b.map([x.op, y.op], lambda a, c: a.builder.add(a.builder.mul(a, c), a))
        bound = x.bound * y.bound + x.bound
        if x.dtype.kind in "iu" and bound >= min(np.iinfo(x.dtype).max, 2**31):
            bound = INF
        return self.add(op, bound, x.exact and y.exact, "map a*c + a")

    # ---- reductions and windows ---------------------------------------------------------------

    def g_argmax(self) -> Any:
        """Variadic reduce: (max, lowest index of the max) over one dimension."""
        x = self.pick(lambda v: v.op.shape.rank >= 1 and v.dtype != BOOL and (v.dtype.kind != "f" or v.exact))
        if x is None:
            return self.g_reduce()
        d = self.src.integer(0, x.op.shape.rank - 1)
        iota = self.b.iota(xm.Shape.array(xm.S32, x.dims), d)

        def reducer(v1: xm.XlaOp, i1: xm.XlaOp, v2: xm.XlaOp, i2: xm.XlaOp) -> list:
            sb = v1.builder
            take = sb.or_(sb.gt(v2, v1), sb.and_(sb.eq(v2, v1), sb.lt(i2, i1)))
            return [sb.select(take, v2, v1), sb.select(take, i2, i1)]

        res = self.b.reduce([x.op, iota], [self.b.constant(_identity("max", x.dtype)),
                                           self.b.constant(np.int32(0))], reducer, [d])
        bound = x.bound if x.dims[d] else INF
        self.add(self.b.get_tuple_element(res, 0), bound, x.exact, f"argmax values dim {d}")
        return self.add(self.b.get_tuple_element(res, 1), x.dims[d], True, f"argmax index dim {d}")

    def g_reduce_window(self) -> Any:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        dt = x.dtype
        kind = self.src.choice(["and", "or"]) if dt == BOOL else self.src.choice(["add", "max", "min"])
        win, strides, bd, wd, pad = [], [], [], [], []
        for n in x.dims:
            win.append(self.src.integer(1, max(1, min(n, 3))))
            strides.append(self.src.integer(1, 2))
            bd.append(2 if self.src.chance(0.2) else 1)
            wd.append(2 if self.src.chance(0.2) else 1)
            pad.append((self.src.integer(0, 1), self.src.integer(0, 1)))
        if self.src.chance(0.25):  # variadic: a second operand, always summed
            y = self.new_input(np.dtype(np.int32), x.dims)
            fn = _combine(kind)

            def both(a: xm.XlaOp, c: xm.XlaOp, e: xm.XlaOp, f: xm.XlaOp) -> list:
                return [fn(a, e), a.builder.add(c, f)]
            res = self.b.reduce_window([x.op, y.op], [self.b.constant(_identity(kind, dt)),
                                                      self.b.constant(np.int32(0))],
                                       both, win, strides, bd, wd, pad)
            self.add(self.b.get_tuple_element(res, 1), INF, True, "reduce_window sum (variadic)")
            op = self.b.get_tuple_element(res, 0)
        else:
            op = self.b.reduce_window(x.op, self.b.constant(_identity(kind, dt)), _combine(kind),
                                      win, strides, bd, wd, pad)
        count = math.prod(win)
        bound = x.bound * count if kind == "add" else x.bound
        if kind in ("max", "min") and dt.kind == "f" and (any(lo or hi for lo, hi in pad) or 2 in bd):
            bound = INF  # a window of padding only is the init, +-inf
        if dt.kind in "iu" and (kind != "add" or bound >= min(np.iinfo(dt).max, 2**31)):
            bound = INF
        exact = x.exact and (bound < EXACT_LIMIT or kind != "add")
        return self.add(op, bound, exact, f"reduce_window {kind} win={win} strides={strides} "
                        f"base_dil={bd} win_dil={wd} pad={pad}")

    def g_select_and_scatter(self) -> Any:
        dtype = self.src.choice([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)])
        dims = self.dims(self.src.integer(1, 2))
        if 0 in dims:
            return self.g_reduce_window()
        n = math.prod(dims)
        values = (self.rng.permutation(n) - n // 2).reshape(dims).astype(dtype)  # distinct: no ties
        x = self.array_input(values, "select_and_scatter operand")
        win = [self.src.integer(1, min(d, 3)) for d in dims]
        strides = [self.src.integer(1, 2) for _ in dims]
        pad = [(self.src.integer(0, w - 1), self.src.integer(0, w - 1)) for w in win]
        out = [_window_out(d, w, s, lo, hi) for d, w, s, (lo, hi) in zip(dims, win, strides, pad)]
        source = self.new_input(dtype, out)
        direction = self.src.choice(["GE", "LE", "GT", "LT"])
        op = self.b.select_and_scatter(
            x, lambda a, c: a.builder.compare(a, c, direction), win, strides, pad, source.op,
            self.b.constant(np.zeros((), dtype)), _combine("add"))
        bound = source.bound * math.prod(win)
        return self.add(op, bound, source.exact, f"select_and_scatter {direction} win={win} "
                        f"strides={strides} pad={pad}")

    def g_conv(self) -> Any:
        n = self.src.integer(1, 2)
        dtype = self.src.choice([np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)])
        fg, bg = 1, 1
        if self.src.chance(0.3):
            fg = 2
        elif self.src.chance(0.3):
            bg = 2
        batch = bg * self.src.integer(1, 2)
        cin = fg * self.src.integer(1, 2)
        cout = max(fg, bg) * self.src.integer(1, 2)
        spatial = [self.src.integer(1, 5) for _ in range(n)]
        kernel = [self.src.integer(1, 3) for _ in range(n)]
        strides = [self.src.integer(1, 2) for _ in range(n)]
        lhs_dil = [self.src.integer(1, 2) for _ in range(n)]
        rhs_dil = [self.src.integer(1, 2) for _ in range(n)]
        pad = []
        for s, k, ld, rd in zip(spatial, kernel, lhs_dil, rhs_dil):
            lo, hi = self.src.integer(-1, 2), self.src.integer(-1, 2)
            base = (s - 1) * ld + 1
            if base + lo + hi < (k - 1) * rd + 1:
                lo, hi = max(lo, 0), max(hi, 0)
            if base + lo + hi < 0:
                lo, hi = 0, 0
            pad.append((lo, hi))
        lp, kp, op_ = self.perm(n + 2), self.perm(n + 2), self.perm(n + 2)
        lhs_dims, rhs_dims = [0] * (n + 2), [0] * (n + 2)
        lhs_dims[lp[0]], lhs_dims[lp[1]] = batch, cin
        rhs_dims[kp[0]], rhs_dims[kp[1]] = cout, cin // fg
        for i in range(n):
            lhs_dims[lp[2 + i]], rhs_dims[kp[2 + i]] = spatial[i], kernel[i]
        lhs = self.pick(lambda v: v.dims == tuple(lhs_dims) and v.dtype == dtype)
        if lhs is None or self.src.chance(0.5):
            lhs = self.new_input(dtype, lhs_dims)
        rhs = self.new_input(dtype, rhs_dims)
        dn = xm.ConvDimensionNumbers(
            input_batch_dimension=lp[0], input_feature_dimension=lp[1],
            input_spatial_dimensions=tuple(lp[2:]), kernel_output_feature_dimension=kp[0],
            kernel_input_feature_dimension=kp[1], kernel_spatial_dimensions=tuple(kp[2:]),
            output_batch_dimension=op_[0], output_feature_dimension=op_[1],
            output_spatial_dimensions=tuple(op_[2:]))
        op = self.b.conv_general_dilated(lhs.op, rhs.op, strides, pad, lhs_dil, rhs_dil, dn,
                                         feature_group_count=fg, batch_group_count=bg)
        bound = lhs.bound * rhs.bound * (cin // fg) * math.prod(kernel)
        if dtype.kind == "i" and bound >= 2**31:
            bound = INF
        return self.add(op, bound, lhs.exact and rhs.exact,
                        f"conv strides={strides} pad={pad} lhs_dil={lhs_dil} rhs_dil={rhs_dil} "
                        f"fg={fg} bg={bg} {dn}")

    def g_ragged_dot(self) -> Any:
        """A ragged non-contracting (lhs [(b,) m, k], rhs [(b,) g, k, n]), contracting
        (lhs [m, k], rhs [k, n]) or batch (lhs [b, m, k], rhs [b, k, n]) dimension, with
        group sizes that may be empty, short, past the end or negative."""
        mode = self.src.choice(["non_contracting", "non_contracting", "contracting", "batch"])
        dtype = self.src.choice(list(WIDE_FLOATS) + [np.dtype(np.int32)])
        b, m, k, n, g = (self.src.integer(1, 3), self.src.integer(0, 5), self.src.integer(0, 4),
                         self.src.integer(1, 3), self.src.integer(0, 3))
        batch = mode == "batch" or (mode == "non_contracting" and self.src.chance(0.3))
        ragged_len = k if mode == "contracting" else b if mode == "batch" else m
        sizes = [self.src.integer(-1 if self.src.chance(0.2) else 0, ragged_len) for _ in range(g)]
        if mode == "non_contracting":
            lhs_dims, rhs_dims = [m, k], [g, k, n]
            dn = xm.DotDimensionNumbers(*(((2,), (2,), (0,), (0,)) if batch else ((1,), (1,))))
            dnums = xm.RaggedDotDimensionNumbers(dn, (1 if batch else 0,), (1 if batch else 0,))
            gs_dims = [b, g] if batch and self.src.chance(0.5) else [g]
        elif mode == "contracting":
            lhs_dims, rhs_dims, gs_dims = [m, k], [k, n], [g]
            dnums = xm.RaggedDotDimensionNumbers(xm.DotDimensionNumbers((1,), (0,)), (1,))
        else:
            lhs_dims, rhs_dims, gs_dims = [m, k], [k, n], [g]
            dnums = xm.RaggedDotDimensionNumbers(xm.DotDimensionNumbers((2,), (1,), (0,), (0,)), (0,))
        if batch:
            lhs_dims, rhs_dims = [b, *lhs_dims], [b, *rhs_dims]
        lhs = self.pick(lambda v: v.dims == tuple(lhs_dims) and v.dtype == dtype)
        if lhs is None or self.src.chance(0.5):
            lhs = self.new_input(dtype, lhs_dims)
        rhs = self.new_input(dtype, rhs_dims)
        values = np.resize(np.array(sizes or [0], np.int64), gs_dims)
        gs = self.array_input(values.astype(self.src.choice([np.int32, np.int64])), "group_sizes")
        if self.src.chance(0.3):
            # Narrow operands (f8e4m3fn with an f32 result, as the MoE kernels run, or s4 with
            # s32): fresh small values, so every product and sum is exact.
            t, wide = self.src.choice([(np.dtype(ml_dtypes.float8_e4m3fn), np.float32),
                                       (np.dtype(ml_dtypes.float8_e5m2), np.float32),
                                       (np.dtype(ml_dtypes.int4), np.int32)])
            narrow = [self.narrow_input(t, tuple(dims)) for dims in (lhs_dims, rhs_dims)]
            op = self.b.ragged_dot(*narrow, gs, dnums, preferred_element_type=wide)
            return self.add(op, 6 * 8 * max(k, 1) * max(g, 1), True,
                            f"ragged_dot {t} -> {np.dtype(wide)} {mode} sizes={sizes} {dnums}")
        op = self.b.ragged_dot(lhs.op, rhs.op, gs, dnums)
        # A negative size can put an index in several groups.
        bound = lhs.bound * rhs.bound * max(k, 1) * max(g, 1)
        if dtype.kind == "i" and bound >= 2**31:
            bound = INF
        return self.add(op, bound, lhs.exact and rhs.exact, f"ragged_dot {mode} sizes={sizes} {dnums}")

    def g_scaled_dot(self) -> Any:
        """lhs [m, k] and rhs [k, n] with power-of-two scales over blocks of k (and of m)."""
        dtype = self.src.choice(list(WIDE_FLOATS))
        m, n, kb, block = (self.src.integer(1, 4), self.src.integer(1, 3), self.src.integer(0, 3),
                           self.src.integer(1, 3))
        mb = self.src.choice([1, m])
        if self.src.chance(0.4):
            return self.narrow_scaled_dot(m, n, kb, block, mb)
        lhs = self.new_input(dtype, [m, kb * block])
        rhs = self.new_input(dtype, [kb * block, n])
        scales = [np.exp2(self.rng.integers(-2, 3, dims)).astype(dtype) for dims in ((mb, kb), (kb, 1))]
        ls, rs = (self.array_input(s, "scale") for s in scales)
        op = self.b.scaled_dot(lhs.op, ls, rhs.op, rs, xm.DotDimensionNumbers((1,), (0,)))
        bound = lhs.bound * rhs.bound * 16 * max(kb * block, 1)
        return self.add(op, bound, lhs.exact and rhs.exact, f"scaled_dot block={block} m_blocks={mb}")

    def narrow_scaled_dot(self, m: int, n: int, kb: int, block: int, mb: int) -> Any:
        """MXFP8/NVFP4-like: narrow float operands (halves up to 6, rounded to the type) with
        f8e8m0fnu or f8e4m3fn power-of-two scales, an f32 result: every product and sum exact."""
        t = np.dtype(self.src.choice([ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                                      ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3]))
        st = np.dtype(self.src.choice([ml_dtypes.float8_e8m0fnu, ml_dtypes.float8_e4m3fn]))
        lhs, rhs = self.narrow_input(t, (m, kb * block)), self.narrow_input(t, (kb * block, n))
        ls, rs = (self.array_input(np.exp2(self.rng.integers(-2, 3, dims)).astype(np.float32).astype(st),
                                   f"{st} scale") for dims in ((mb, kb), (kb, 1)))
        op = self.b.scaled_dot(lhs, ls, rhs, rs, xm.DotDimensionNumbers((1,), (0,)),
                               preferred_element_type=np.float32)
        return self.add(op, 6 * 6 * 16 * max(kb * block, 1), True,
                        f"scaled_dot {t} scales {st} block={block} m_blocks={mb}")

    # ---- transforms and linear algebra --------------------------------------------------------

    def g_fft(self) -> Any:
        # Finite values only: an FFT of inf gives inf or NaN by how the butterflies multiply
        # (a complex twiddle 1 + 0i times inf is inf + NaN i), which no spec pins down.
        x = self.pick(lambda v: v.dtype in WIDE_FLOATS and v.op.shape.rank >= 1 and 0 not in v.dims
                      and v.bound < INF)
        if x is None:
            x = self.new_input(self.src.choice([np.dtype(np.float32), np.dtype(np.float64)]),
                               [self.src.integer(1, 4) for _ in range(self.src.integer(1, 2))])
        b = self.b
        k = self.src.integer(1, min(3, x.op.shape.rank))
        lengths = list(x.dims[-k:])
        kind = self.src.choice(["FFT", "IFFT", "RFFT", "IRFFT"])
        ctype = np.dtype(np.complex64 if x.dtype == np.float32 else np.complex128)
        if kind == "RFFT":
            out = b.fft(x.op, "RFFT", lengths)
        elif kind == "IRFFT":
            out = b.fft(b.fft(x.op, "RFFT", lengths), "IRFFT", lengths)
        else:
            out = b.fft(b.convert_element_type(x.op, ctype), kind, lengths)
        if kind != "IRFFT":
            out = b.add(b.real(out), b.imag(out))
        return self.add(out, 2 * x.bound * math.prod(lengths), False, f"fft {kind} {lengths}")

    def spd(self) -> tuple[Any, float]:
        """A symmetric positive definite batch X X^T + c I (condition number <= 2)."""
        x = self.pick(lambda v: v.dtype in WIDE_FLOATS and v.op.shape.rank >= 2 and 0 not in v.dims
                      and v.bound < 100)
        if x is None:
            x = self.new_input(self.src.choice([np.dtype(np.float32), np.dtype(np.float64)]),
                               [self.src.integer(1, 3) for _ in range(self.src.integer(2, 3))])
        r, m, k = x.op.shape.rank, x.dims[-2], x.dims[-1]
        batch = list(range(r - 2))
        dn = xm.DotDimensionNumbers([r - 1], [r - 1], batch, batch)
        c = 1.0 + x.bound * x.bound * k
        eye = np.broadcast_to(np.eye(m) * c, x.dims[:-2] + (m, m)).astype(x.dtype)
        a = self.b.add(self.b.dot_general(x.op, x.op, dn), self.b.constant(eye))
        return self.add(a, 2 * c, False, f"spd (c={c:.3g})"), c

    def g_cholesky(self) -> Any:
        a, c = self.spd()
        lower = self.src.chance(0.5)
        m = a.dims[-1]
        tri = np.tril(np.ones((m, m), bool)) if lower else np.triu(np.ones((m, m), bool))
        mask = self.b.constant(np.broadcast_to(tri, a.dims).copy())
        zeros = self.b.constant(np.zeros(a.dims, a.dtype))
        factor = self.b.cholesky(a.op, lower)
        op = self.b.select(mask, factor, zeros)  # the other triangle is unspecified
        return self.add(op, math.sqrt(2 * c), False, f"cholesky lower={lower}")

    def g_triangular_solve(self) -> Any:
        a, c = self.spd()
        factor = self.b.cholesky(a.op, True)
        m = a.dims[-1]
        left = self.src.chance(0.5)
        lower = self.src.chance(0.5)
        unit = self.src.chance(0.3)
        trans = self.src.choice(["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
        # Both triangles of the factor hold something (the unspecified one too), so the
        # solve reads only `lower`'s; a lower factor transposed gives an upper one.
        tri = factor if lower else self.b.transpose(factor, list(range(a.op.shape.rank - 2))
                                                    + [a.op.shape.rank - 1, a.op.shape.rank - 2])
        tri = self.b.select(self.b.constant(np.broadcast_to(
            np.tril(np.ones((m, m), bool)) if lower else np.triu(np.ones((m, m), bool)),
            a.dims).copy()), tri, self.b.constant(np.zeros(a.dims, a.dtype)))
        extra = self.src.integer(1, 3)
        bdims = a.dims[:-2] + ((m, extra) if left else (extra, m))
        rhs = self.new_input(a.dtype, bdims)
        op = self.b.triangular_solve(tri, rhs.op, left, lower, unit, trans)
        # In logs: m can be hundreds (a row_norm value), and the power overflows a float.
        log_growth = m * math.log1p(math.sqrt(2 * c)) if unit else 0.0
        growth = math.exp(log_growth) if log_growth < 700 else math.inf
        return self.add(op, rhs.bound * m * growth, False,
                        f"triangular_solve left={left} lower={lower} unit={unit} {trans}")

    def g_batch_norm(self) -> Any:
        x = self.pick(lambda v: v.dtype in WIDE_FLOATS and v.op.shape.rank >= 2 and 0 not in v.dims
                      and v.bound < 1000)
        if x is None:
            x = self.new_input(np.dtype(np.float32), [self.src.integer(1, 3) for _ in range(3)])
        f = self.src.integer(0, x.op.shape.rank - 1)
        c = x.dims[f]
        scale, offset = self.new_input(x.dtype, [c]), self.new_input(x.dtype, [c])
        eps = 1e-3
        amplification = scale.bound * (2 * x.bound + 1) / math.sqrt(eps) + offset.bound
        if self.src.chance(0.25):
            mean = self.new_input(x.dtype, [c])
            var = self.b.add(self.b.abs(self.new_input(x.dtype, [c]).op),
                             self.b.constant(np.ones((), x.dtype)))
            dy = self.partner(x)
            res = self.b.batch_norm_grad(x.op, scale.op, mean.op, var, dy.op, eps, f)
            m = math.prod(x.dims) // max(c, 1)
            big = scale.bound * dy.bound * (x.bound + mean.bound + 1) * (m + 1) * 4
            self.add(self.b.get_tuple_element(res, 1), big, False, "batch_norm_grad scale")
            self.add(self.b.get_tuple_element(res, 2), dy.bound * m, False, "batch_norm_grad offset")
            return self.add(self.b.get_tuple_element(res, 0), big, False,
                            f"batch_norm_grad feature {f}")
        if self.src.chance(0.5):
            res = self.b.batch_norm_training(x.op, scale.op, offset.op, eps, f)
            self.add(self.b.get_tuple_element(res, 1), x.bound, False, "batch_norm mean")
            self.add(self.b.get_tuple_element(res, 2), x.bound * x.bound * 4, False, "batch_norm var")
            return self.add(self.b.get_tuple_element(res, 0), amplification, False,
                            f"batch_norm_training feature {f}")
        mean = self.new_input(x.dtype, [c])
        var = self.b.add(self.b.abs(self.new_input(x.dtype, [c]).op),
                         self.b.constant(np.ones((), x.dtype)))
        op = self.b.batch_norm_inference(x.op, scale.op, offset.op, mean.op, var, eps, f)
        return self.add(op, scale.bound * (x.bound + mean.bound) + offset.bound, False,
                        f"batch_norm_inference feature {f}")

    # ---- row reductions read back along their rows ---------------------------------------

    def g_row_norm(self) -> Any:
        """A layer norm's shape: row reductions broadcast back along the rows and combined
        with the rows, once or twice, sometimes scaled by a vector along the columns. At
        >= 32K elements, so lowering/passes/row_fusion.py fuses them into one loop over
        blocks of rows (row counts with and without divisors)."""
        dtype = self.src.choice([*WIDE_FLOATS, np.dtype(np.int32)])
        start = len(self.pool)
        cols = self.src.choice([(64,), (96,), (100,), (256,), (1024,), (4, 64), (3, 48)])
        rows = max(self.src.choice([37, 64, 300, 512]), -(-(1 << 15) // math.prod(cols)))
        x = self.new_input(dtype, (rows, *cols))
        shape, tail = (rows, *cols), list(range(1, 1 + len(cols)))
        y = x
        for _ in range(self.src.integer(1, 2)):
            kind = self.src.choice(["add", "add", "max", "min"])
            init = _identity(kind, y.dtype)
            total = self.b.reduce(y.op, self.b.constant(init), _combine(kind), tail)
            bound = y.bound * math.prod(cols) if kind == "add" else y.bound
            sums = self.add(total, bound, y.exact, f"reduce {kind} {tail}")
            back = self.b.broadcast_in_dim(sums.op, shape, [0])
            how = self.src.choice(["sub", "add", "mul", "max"])
            bound = sums.bound * y.bound if how == "mul" else sums.bound + y.bound
            if y.dtype.kind == "i" and bound >= 2**31:
                bound = math.inf
            y = self.add(getattr(self.b, how)(y.op, back), bound, y.exact and sums.exact,
                         f"{how} rows, broadcast {kind}")
        if self.src.chance(0.5):
            scale = self.new_input(dtype, cols)
            along = self.b.broadcast_in_dim(scale.op, shape, tail)
            bound = y.bound * scale.bound
            if y.dtype.kind == "i" and bound >= 2**31:
                bound = math.inf
            y = self.add(self.b.mul(y.op, along), bound, y.exact and scale.exact, "mul by columns")
        # Returned, not left for other families to pick: at this size their references
        # (a triangular solve of 300 rows, a sort network...) would take the run's time.
        del self.pool[start:]
        self.wanted.append(y)
        return y

    # ---- bits ---------------------------------------------------------------------------------

    def g_bits(self) -> Any:
        x = self.pick(lambda v: v.dtype != BOOL)
        if x is None:
            return self.g_unary()
        b = self.b
        what = self.src.choice(["bitcast", "reduce_precision", "dimension_size"])
        if what == "dimension_size" and x.op.shape.rank:
            d = self.src.integer(0, x.op.shape.rank - 1)
            return self.add(b.get_dimension_size(x.op, d), x.dims[d], True, f"get_dimension_size {d}")
        if what == "reduce_precision" and x.dtype.kind == "f":
            e, m = self.src.choice([(5, 10), (8, 7), (5, 2), (8, 23), (4, 3)])
            fits = x.bound < 15 if e == 4 else x.bound < 60000
            return self.add(b.reduce_precision(x.op, e, m), 2 * x.bound if fits else INF,
                            x.exact and fits, f"reduce_precision {e} {m}")
        partner = {np.dtype(np.float32): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.int64),
                   np.dtype(np.int8): np.dtype(np.uint8), np.dtype(np.uint8): np.dtype(np.int8),
                   np.dtype(np.int32): np.dtype(np.float32), np.dtype(np.uint32): np.dtype(np.int32),
                   np.dtype(np.int64): np.dtype(np.float64), np.dtype(np.uint64): np.dtype(np.int64),
                   np.dtype(np.uint16): np.dtype(np.int16)}.get(x.dtype, np.dtype(np.int32))
        if partner.itemsize != x.dtype.itemsize:
            return self.add(b.get_dimension_size(x.op, 0) if x.op.shape.rank else b.neg(x.op),
                            INF, True, "get_dimension_size or neg")
        op = b.bitcast_convert_type(x.op, partner)
        # A float from any bit pattern goes straight back, so no NaN payload meets arithmetic;
        # an inexact float's last bits differ within tolerance, its bits as an int would not.
        if partner.kind == "f" or not x.exact:
            op = b.bitcast_convert_type(op, x.dtype)
            return self.add(op, x.bound, x.exact, f"bitcast {partner} and back")
        return self.add(op, INF, True, f"bitcast {partner}")

    def g_rng_bit_generator(self) -> Any:
        """THREE_FRY (u64[2] state) or PHILOX (u64[3]); both the new state and the bits."""
        algorithm, size = self.src.choice([("THREE_FRY", 2), ("PHILOX", 3)])
        words = self.rng.integers(0, 2**63, size, dtype=np.uint64) * np.uint64(self.src.integer(1, 2))
        if self.src.chance(0.3):
            words[1] = np.uint64(2**64 - self.src.integer(1, 3))  # the counter carries over
        state = self.array_input(words, "rng state")
        dtype = self.src.choice([np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32),
                                 np.dtype(np.uint64)])
        dims = self.dims()
        res = self.b.rng_bit_generator(algorithm, state, xm.Shape.array(dtype, dims))
        self.add(self.b.get_tuple_element(res, 0), INF, True, f"rng_bit_generator {algorithm} state")
        return self.add(self.b.get_tuple_element(res, 1), INF, True,
                        f"rng_bit_generator {algorithm} {dtype}{list(dims)}")

    def g_collective(self) -> Any:
        """Collectives on one replica (every group is {0}): data flow and buffers only."""
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.add(self.b.replica_id(), 0, True, "replica_id")
        b = self.b
        kind = self.src.choice(["all_reduce", "reduce_scatter", "all_gather", "all_to_all",
                                "collective_permute", "collective_broadcast", "replica_id",
                                "ragged_all_to_all"])
        d = self.src.integer(0, x.op.shape.rank - 1)
        combine = _combine("or" if x.dtype == BOOL else "add")
        if kind == "all_reduce":
            op = b.all_reduce(x.op, combine)
        elif kind == "reduce_scatter":
            op = b.reduce_scatter(x.op, combine, d, 1)
        elif kind == "all_gather":
            op = b.all_gather(x.op, d, 1)
        elif kind == "all_to_all":
            op = b.all_to_all(x.op, d, self.src.integer(0, x.op.shape.rank - 1), 1)
        elif kind == "collective_permute":
            op = b.collective_permute(x.op, [(0, 0)] if self.src.chance(0.7) else [])
        elif kind == "collective_broadcast":
            op = b.collective_broadcast(x.op)
        elif kind == "ragged_all_to_all":
            return self.ragged_all_to_all(x)
        else:
            rid = b.convert_element_type(b.replica_id(), x.dtype)
            op = b.add(x.op, b.broadcast(rid, list(x.dims))) if x.dtype != BOOL else x.op
        return self.add(op, x.bound, x.exact, kind)

    def ragged_all_to_all(self, x: Any) -> Any:
        """Rows of x into a fresh output at 1 or 2 disjoint ranges (one replica: its own rows;
        overlapping writes would leave the order open); sizes may be 0."""
        n, m, u = x.dims[0], self.src.integer(1, 5), self.src.integer(1, 2)
        out = self.new_input(x.dtype, (m, *x.dims[1:]))
        cuts = [0, *sorted(self.src.integer(0, m) for _ in range(u - 1)), m]
        starts, sizes, at = [], [], []
        for j in range(u):
            o = self.src.integer(cuts[j], cuts[j + 1])
            k = self.src.integer(0, min(cuts[j + 1] - o, n))
            starts.append(self.src.integer(0, n - k))
            sizes.append(k)
            at.append(o)
        dtype = self.src.choice(INDEX_TYPES)
        shape = (1,) if u == 1 and self.src.chance(0.5) else (1, u)
        ops = [self.array_input(np.array(v, dtype).reshape(shape), what)
               for v, what in ((starts, "input_offsets"), (sizes, "send_sizes"), (at, "output_offsets"))]
        op = self.b.ragged_all_to_all(x.op, ops[0], ops[1], out.op, ops[2], ops[1])
        return self.add(op, max(x.bound, out.bound), x.exact and out.exact,
                        f"ragged_all_to_all starts={starts} sizes={sizes} at={at}")

    def g_custom_call(self) -> Any:
        x = self.pick()
        b = self.b
        target = self.src.choice(sorted(CUSTOM_CALLS))
        if target == "fuzz_pair":
            y = x if self.src.chance(0.3) else self.partner(x)
            res = b.custom_call(target, [x.op, y.op], xm.Shape.tuple([x.op.shape, x.op.shape]))
            self.add(b.get_tuple_element(res, 0), x.bound, x.exact, "custom_call pair.0")
            bound = x.bound + y.bound if x.dtype.kind == "f" else INF
            return self.add(b.get_tuple_element(res, 1), bound, x.exact and y.exact, "custom_call pair.1")
        op = b.custom_call(target, [x.op], x.op.shape)
        bound = 2 * x.bound + 1 if target == "fuzz_twice_plus_one" and x.dtype.kind == "f" else (
            x.bound if target == "fuzz_identity" else INF)
        return self.add(op, bound, x.exact, f"custom_call {target}")

    # ---- shared operands ----------------------------------------------------------------------

    def g_twin(self) -> Any:
        """Two in-place ops on one operand (or two structurally identical broadcast
        constants, which the compiler may merge), both returned, sometimes with the operand."""
        if self.src.chance(0.3):
            dtype = self.src.choice([np.dtype(np.int32), np.dtype(np.float32)])
            dims = [self.src.integer(1, 6) for _ in range(self.src.integer(1, 2))]
            k = np.array(self.src.integer(0, 2), dtype)
            firsts = [self.add(self.b.broadcast(self.b.constant(k), dims), float(k), True,
                               f"broadcast constant {k} {dims}") for _ in range(2)]
        else:
            x = self.pick()
            firsts = [x, x]
        families = ["scatter", "dus", "sort", "while", "dynamic_slice"]
        kinds = self.src.choice(families), self.src.choice(families)
        outs = []
        for kind, x in zip(kinds, firsts):
            if kind in ("scatter", "sort") and x.op.shape.rank == 0:
                kind = "dus"
            if kind == "scatter":
                outs.append(self.scatter_on([x])[0])
            elif kind == "sort":
                outs.append(self.sort_on([x])[0])
            elif kind == "dus":
                outs.append(self.dus_on(x))
            elif kind == "dynamic_slice":
                starts = [self.array_input(np.array(self.src.integer(-1, d), np.int32), "start")
                          for d in x.dims]
                sizes = [self.src.integer(0, d) for d in x.dims]
                outs.append(self.add(self.b.dynamic_slice(x.op, starts, sizes), x.bound, x.exact,
                                     f"dynamic_slice {sizes}"))
            else:
                outs.append(self.while_on(x))
        on = "two equal broadcasts" if firsts[0] is not firsts[1] else "one value"
        self.trace.append(f"twin {kinds} on {on}")
        if kinds[0] == "scatter" and outs[0].op.shape.rank and self.src.chance(0.3):
            outs.append(self.scatter_on([outs[0]])[0])  # a scatter into a scatter's result
        self.wanted.extend(outs)
        if self.src.chance(0.4):
            self.wanted.append(firsts[0])
        return outs[-1]
