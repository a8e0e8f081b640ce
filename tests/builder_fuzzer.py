"""A fuzzer of the XlaBuilder API: random op sequences with random, often invalid, arguments.

`run_case(src)` builds one computation from a fresh `XlaBuilder`: a few
parameters and constants, then a sequence of random builder calls (every
public method of API.md, the operator overloads and `x[...]`), each with
arguments that are right in kind but often wrong in value (ranks, dimension
numbers, dtypes, paddings, permutations, sub-computations with the wrong
signature), and now and then of the wrong kind altogether (None, a string, a
float, an op of another builder). The contract checked: every call either
returns an XlaOp or raises `xm.ShapeError`; `build()` either raises
`xm.ShapeError` or gives a module whose text parses and passes the dialect's
verifier (`dialect.verify.verify_module`, which re-runs every shape rule on the
parsed IR). Anything else is a failure, reported with the trace of calls.

The random choices come from a `Source`: `HypothesisSource` (tests, which
shrink a failure to a small trace) or `RandomSource` (bench/fuzz_builder.py).
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mlir import ir

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.dialect.verify import verify_module

# ---- sources of random choices ------------------------------------------------------------------


class Source:
    """Random choices; subclasses draw from hypothesis or from `random.Random`."""

    def integer(self, lo: int, hi: int) -> int:  # inclusive
        raise NotImplementedError

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.integer(0, len(seq) - 1)]

    def chance(self, p: float) -> bool:
        return self.integer(0, 999) < int(p * 1000)


class RandomSource(Source):
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class HypothesisSource(Source):
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))


# ---- the fuzzer --------------------------------------------------------------------------------

ARRAY_TYPES = [xm.PRED, xm.S8, xm.S32, xm.S64, xm.U8, xm.U32, xm.F16, xm.BF16, xm.F32, xm.F64,
               xm.C64]
UNARY = ("abs neg sign floor ceil round round_nearest_afz round_nearest_even exp expm1 log log1p "
         "logistic sqrt rsqrt cbrt sin cos tan tanh cosh atan erf is_finite not_ clz "
         "population_count real imag logical_not optimization_barrier").split()
BINARY = ("add sub mul div rem max min pow atan2 complex and_ or_ xor shift_left "
          "shift_right_arithmetic shift_right_logical eq ne lt le gt ge eq_total_order "
          "lt_total_order").split()
DIRECTIONS = ["EQ", "NE", "LT", "LE", "GT", "GE"]
COMPARISON_TYPES = [None, "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED"]


def is_array_op(o: Any) -> bool:
    return isinstance(o, xm.XlaOp) and o.shape.is_array()


class Garbage:
    """An object of no kind the API knows."""

    def __repr__(self) -> str:
        return "Garbage()"


@dataclass
class Outcome:
    calls: int = 0
    ok: int = 0
    shape_errors: int = 0
    built: bool = False
    build_shape_error: bool = False
    failure: str | None = None
    text: str | None = None  # the built module
    trace: list[str] = field(default_factory=list)


class Fuzzer:
    """One random computation; the methods `m_<name>` draw the arguments of one builder call."""

    def __init__(self, src: Source, steps: int = 8, garbage: float = 0.03) -> None:
        self.src = src
        self.steps = steps
        self.garbage = garbage
        self.b = xm.XlaBuilder("fuzz")
        self.other = xm.XlaBuilder("other")  # its ops must be rejected (computations are closed)
        self.other_op = self.other.parameter(0, xm.Shape.array(xm.F32, (2,)))
        self.pool: list[xm.XlaOp] = []
        self.outcome = Outcome()
        self.methods = sorted(n[2:] for n in dir(self) if n.startswith("m_"))

    # ---- small draws ------------------------------------------------------------------------

    def i(self, lo: int = -1, hi: int = 4) -> int:
        return self.src.integer(lo, hi)

    def arg_i(self, lo: int = -1, hi: int = 4) -> Any:
        """An int the builder receives as an argument (so it may be garbage)."""
        return self.maybe_garbage(self.i(lo, hi))

    def ints(self, n: int | None = None, lo: int = -1, hi: int = 4) -> list[int]:
        n = self.i(0, 4) if n is None else n
        return [self.i(lo, hi) for _ in range(n)]

    def maybe_garbage(self, value: Any) -> Any:
        """`value`, or now and then something of the wrong kind."""
        if not self.src.chance(self.garbage):
            return value
        return self.src.choice([None, "x", 1.5, -7, [1, "a"], (None,), Garbage(), self.other_op,
                                np.zeros(2), True, [[0, 1]], {"a": 1}])

    def etype(self) -> xm.PrimitiveType:
        return self.src.choice(ARRAY_TYPES)

    def any_type(self) -> Any:
        t = self.etype()
        return self.src.choice([t, t, xm.dtype_of(t), "f32", xm.TOKEN, xm.TUPLE, "nope", np.object_,
                                np.str_])

    def dims_for(self, rank: int) -> list[int]:
        return [self.i(0, 4) for _ in range(rank)]

    def shape(self, allow_tuple: bool = True) -> xm.Shape:
        r = self.i(0, 8)
        if r == 8 and allow_tuple:
            return xm.Shape.tuple([self.shape(False) for _ in range(self.i(0, 2))])
        if r == 7 and allow_tuple:
            return xm.Shape.token()
        return xm.Shape.array(self.etype(), self.dims_for(min(r, 3)))

    def op(self) -> xm.XlaOp:
        if not self.pool:
            self.pool.append(self.b.parameter(0, xm.Shape.array(xm.F32, (2, 3))))
        # Prefer recent ops, so chains grow.
        k = len(self.pool)
        return self.pool[max(0, k - 1 - self.i(0, min(k - 1, 6)))] if self.src.chance(0.7) \
            else self.src.choice(self.pool)

    def arr_op(self) -> xm.XlaOp:
        for _ in range(4):
            o = self.op()
            if is_array_op(o):
                return o
        return o

    def scalar_op(self, t: Any = None) -> xm.XlaOp:
        t = t or self.etype()
        if self.src.chance(0.2):
            return self.op()
        return self.b.constant(np.zeros((), xm.dtype_of(t)))

    @staticmethod
    def rank(o: Any) -> int:
        return o.shape.rank if is_array_op(o) else 0

    @staticmethod
    def etype_of(o: Any) -> Any:
        return o.shape.element_type if is_array_op(o) else None

    def dim_list(self, rank: int, n: int | None = None) -> list[int]:
        """Mostly valid distinct dimensions of a rank-`rank` array, sometimes not."""
        if self.src.chance(0.7) and rank > 0:
            dims = [d for d in range(rank) if self.src.chance(0.5)]
            if n is not None:
                dims = list(range(rank))[:n]
            if self.src.chance(0.5):
                dims = dims[::-1]
            return dims
        return self.ints(n, -2, rank + 1)

    def perm(self, rank: int) -> list[int]:
        p = list(range(rank))
        for k in range(rank - 1, 0, -1):
            j = self.i(0, k)
            p[k], p[j] = p[j], p[k]
        if self.src.chance(0.25):
            return self.ints(self.i(max(rank - 1, 0), rank + 1), -1, rank)
        return p

    def computation(self, arity: int | None = None, t: Any = None) -> Any:
        """A sub-computation: a callable or an XlaComputation, of the right signature or not."""
        kind = self.i(0, 9)
        arity = self.i(0, 3) if arity is None else arity
        if kind == 0:  # an XlaComputation with random scalar parameters
            sub = xm.XlaBuilder("sub")
            n = self.i(0, 4) if self.src.chance(0.5) else arity
            et = t or self.etype()
            ps = [sub.parameter(k, xm.Shape.array(et if self.src.chance(0.8) else self.etype(), ()))
                  for k in range(n)]
            if not ps:
                sub.constant(np.zeros((), xm.dtype_of(et)))
            elif len(ps) >= 2:
                sub.add(ps[0], ps[1]) if ps[0].shape == ps[1].shape else sub.tuple(ps)
            return sub.build()
        if kind == 1:
            return lambda *ps: None  # returns no op
        if kind == 2:
            return lambda *ps: self.other_op  # an op of another builder
        if kind == 3:
            return lambda *ps: list(ps)  # a tuple of all parameters
        if kind == 4:
            return lambda a: a  # wrong arity unless one parameter
        if kind == 5:
            return lambda a, b: a.builder.lt(a, b)  # a comparator
        if kind == 6:
            return "not a computation"
        if kind == 7:
            def returns_constant(*ps: xm.XlaOp) -> xm.XlaOp:
                builder = ps[0].builder if ps else xm.XlaBuilder("c")
                return builder.constant(np.zeros((), xm.dtype_of(self.etype())))
            return returns_constant
        half = max(arity // 2, 1)

        def binary(*ps: xm.XlaOp) -> Any:  # acc_i + x_i, the usual reducer
            if len(ps) < 2:
                return ps[0] if ps else None
            sb = ps[0].builder
            outs = [sb.add(ps[k], ps[min(k + half, len(ps) - 1)]) for k in range(half)]
            return outs[0] if len(outs) == 1 else outs
        return binary

    # ---- the builder calls ----------------------------------------------------------------------

    def m_parameter(self) -> Any:
        return self.b.parameter(self.i(-1, len(self.b.parameters) + 1), self.shape(),
                                **({"name": "p"} if self.src.chance(0.5) else {}))

    def m_constant(self) -> Any:
        kind = self.i(0, 6)
        t = self.etype()
        if kind == 0:
            return self.b.constant(self.src.choice([True, 3, -2.5, 1 + 2j, 2**40, (1, 2.0), ()]))
        if kind == 1:
            return self.b.constant(np.array(["a", "b"]))
        if kind == 2:
            return self.b.constant(np.array([object()], dtype=object))
        if kind == 3:
            return self.b.constant(np.zeros((2, 3), np.float32)[:, ::2])
        return self.b.constant(np.ones(self.dims_for(self.i(0, 3)), xm.dtype_of(t)))

    def m_unary(self) -> Any:
        return getattr(self.b, self.src.choice(UNARY))(self.op())

    def m_binary(self) -> Any:
        lhs, rhs = self.op(), self.op()
        if self.src.chance(0.3):
            rank = min(self.rank(lhs), self.rank(rhs))
            return getattr(self.b, self.src.choice(BINARY))(lhs, rhs, self.dim_list(max(
                self.rank(lhs), self.rank(rhs)), rank))
        return getattr(self.b, self.src.choice(BINARY))(lhs, rhs)

    def m_compare(self) -> Any:
        return self.b.compare(self.op(), self.op(), self.src.choice(DIRECTIONS + ["XX"]),
                              self.src.choice(COMPARISON_TYPES + ["BAD"]))

    def m_overload(self) -> Any:
        x = self.arr_op()
        if not isinstance(x, xm.XlaOp):
            x = self.pool[-1] if self.pool else self.b.constant(1.0)
        y = self.src.choice([self.op(), 2, 1.5, np.int8(3), np.float64(2.0), True])
        ops = [lambda: x + y, lambda: y - x, lambda: x * y, lambda: x / y, lambda: x % y,
               lambda: x ** y, lambda: -x, lambda: x @ y, lambda: x & y, lambda: x | y,
               lambda: x ^ y, lambda: ~x, lambda: x << y, lambda: x >> y]
        return self.src.choice(ops)()

    def m_getitem(self) -> Any:
        x = self.op()
        if not isinstance(x, xm.XlaOp):
            x = self.pool[-1] if self.pool else self.b.constant(1.0)
        idx = []
        for _ in range(self.i(0, self.rank(x) + 1)):
            k = self.i(0, 3)
            if k == 0:
                idx.append(self.i(-4, 4))
            elif k == 1:
                idx.append(slice(self.src.choice([None, -5, -1, 0, 1, 3]),
                                 self.src.choice([None, -2, 0, 2, 9]),
                                 self.src.choice([None, -2, -1, 1, 2, 0])))
            elif k == 2:
                idx.append(Ellipsis)
            else:
                idx.append(self.src.choice([None, 1.5, "a", np.int64(1), [0, 1]]))
        return x[tuple(idx)] if self.src.chance(0.8) else x[idx[0] if idx else ()]

    def m_select(self) -> Any:
        return self.b.select(self.op(), self.op(), self.op())

    def m_clamp(self) -> Any:
        return self.b.clamp(self.op(), self.op(), self.op())

    def m_convert(self) -> Any:
        f = self.src.choice([self.b.convert_element_type, self.b.bitcast_convert_type])
        return f(self.op(), self.any_type())

    def m_reduce_precision(self) -> Any:
        return self.b.reduce_precision(self.op(), self.arg_i(-1, 12), self.arg_i(-1, 25))

    def m_broadcast(self) -> Any:
        return self.b.broadcast(self.op(), self.ints(None, -1, 3))

    def m_broadcast_in_dim(self) -> Any:
        x = self.op()
        out_rank = self.i(0, 4)
        out = self.dims_for(out_rank)
        if is_array_op(x) and self.src.chance(0.6):
            out = list(x.shape.dimensions) + out
        return self.b.broadcast_in_dim(x, out, self.dim_list(len(out), self.rank(x)))

    def m_reshape(self) -> Any:
        x = self.op()
        n = x.shape.numel if is_array_op(x) else 1
        sizes = self.src.choice([[n], [1, n], [n, 1], self.dims_for(self.i(0, 3)), [-1, n], []])
        if self.src.chance(0.3):
            return self.b.reshape(x, sizes, self.perm(self.rank(x)))
        return self.b.reshape(x, sizes)

    def m_collapse(self) -> Any:
        x = self.op()
        return self.b.collapse(x, self.dim_list(self.rank(x)))

    def m_transpose(self) -> Any:
        x = self.op()
        return self.b.transpose(x, self.perm(self.rank(x)))

    def m_rev(self) -> Any:
        x = self.op()
        return self.b.rev(x, self.dim_list(self.rank(x)))

    def m_slice(self) -> Any:
        x = self.op()
        r = self.rank(x) + (self.i(-1, 1) if self.src.chance(0.2) else 0)
        starts = self.ints(max(r, 0), -1, 3)
        limits = self.ints(max(r, 0), -1, 5)
        strides = self.ints(max(r, 0), -1, 3) if self.src.chance(0.5) else None
        return self.b.slice(x, starts, limits, strides)

    def m_concat(self) -> Any:
        ops = [self.op() for _ in range(self.i(0, 3))]
        return self.b.concat_in_dim(ops, self.arg_i(-1, 3))

    def m_pad(self) -> Any:
        x = self.op()
        config = [(self.i(-3, 2), self.i(-3, 2), self.i(-1, 2))
                  for _ in range(self.rank(x) + (self.i(-1, 1) if self.src.chance(0.2) else 0))]
        return self.b.pad(x, self.scalar_op(self.etype_of(x)),
                          config)

    def m_iota(self) -> Any:
        s = self.shape()
        return self.b.iota(s, self.arg_i(-1, 3))

    def m_get_dimension_size(self) -> Any:
        return self.b.get_dimension_size(self.op(), self.arg_i(-1, 3))

    def m_dynamic_slice(self) -> Any:
        x = self.op()
        r = self.rank(x)
        starts = [self.scalar_op(self.src.choice([xm.S32, xm.S64, xm.U8, xm.F32]))
                  for _ in range(r + (self.i(-1, 1) if self.src.chance(0.2) else 0))]
        return self.b.dynamic_slice(x, starts, self.ints(r, -1, 4))

    def m_dynamic_update_slice(self) -> Any:
        x, u = self.op(), self.op()
        starts = [self.scalar_op(self.src.choice([xm.S32, xm.S8, xm.F32]))
                  for _ in range(self.rank(x) + (self.i(-1, 1) if self.src.chance(0.2) else 0))]
        return self.b.dynamic_update_slice(x, u, starts)

    def m_gather(self) -> Any:
        x, idx = self.op(), self.op()
        r, ri = self.rank(x), self.rank(idx)
        dn = xm.GatherDimensionNumbers(
            offset_dims=self.dim_list(r + ri), collapsed_slice_dims=self.dim_list(r),
            start_index_map=self.dim_list(r), index_vector_dim=self.arg_i(-1, ri + 1),
            **({"operand_batching_dims": self.dim_list(r),
                "start_indices_batching_dims": self.dim_list(ri)}
               if self.src.chance(0.2) else {}))
        return self.b.gather(x, idx, dn, self.ints(r + (self.i(-1, 1) if self.src.chance(0.2) else 0),
                                                   -1, 4))

    def m_scatter(self) -> Any:
        n = self.i(1, 2)
        ops = [self.op() for _ in range(n)]
        idx = self.op()
        ups = [self.op() for _ in range(n if self.src.chance(0.8) else self.i(0, 3))]
        r, ri = self.rank(ops[0]), self.rank(idx)
        dn = xm.ScatterDimensionNumbers(
            update_window_dims=(self.dim_list(self.rank(ups[0]) if ups else 1)),
            inserted_window_dims=self.dim_list(r),
            scatter_dims_to_operand_dims=self.dim_list(r),
            index_vector_dim=self.arg_i(-1, ri + 1),
            **({"input_batching_dims": self.dim_list(r),
                "scatter_indices_batching_dims": self.dim_list(ri)}
               if self.src.chance(0.2) else {}))
        et = self.etype_of(ops[0])
        single = n == 1 and self.src.chance(0.7)
        return self.b.scatter(ops[0] if single else ops, idx, ups[0] if single and ups else ups,
                              self.computation(2 * n, et), dn)

    def m_reduce(self) -> Any:
        n = self.i(1, 2)
        ops = [self.arr_op() for _ in range(n)]
        inits = [self.scalar_op(self.etype_of(o) if self.src.chance(0.8) else None) for o in ops]
        single = n == 1 and self.src.chance(0.7)
        return self.b.reduce(ops[0] if single else ops, inits[0] if single else inits,
                             self.computation(2 * n, self.etype_of(ops[0])),
                             self.dim_list(self.rank(ops[0])))

    def padding(self, r: int) -> Any:
        k = self.i(0, 3)
        if k == 0:
            return self.src.choice(["SAME", "VALID", "FULL"])
        if k == 1:
            return None
        return [(self.i(-1, 2), self.i(-1, 2)) for _ in range(r + (self.i(-1, 1) if self.src.chance(0.2)
                                                                     else 0))]

    def window(self, r: int, lo: int = 0, hi: int = 3) -> Any:
        if self.src.chance(0.3):
            return None
        return self.ints(r + (self.i(-1, 1) if self.src.chance(0.15) else 0), lo, hi)

    def m_reduce_window(self) -> Any:
        x = self.arr_op()
        r = self.rank(x)
        et = self.etype_of(x)
        return self.b.reduce_window(x, self.scalar_op(et), self.computation(2, et),
                                    self.ints(r, 0, 3), self.window(r), self.window(r),
                                    self.window(r), self.padding(r))

    def m_select_and_scatter(self) -> Any:
        x, source = self.arr_op(), self.arr_op()
        r = self.rank(x)
        et = self.etype_of(x)
        return self.b.select_and_scatter(x, self.computation(2, et), self.ints(r, 0, 3),
                                         self.window(r), self.padding(r), source,
                                         self.scalar_op(et), self.computation(2, et))

    def m_map(self) -> Any:
        ops = [self.op() for _ in range(self.i(0, 3))]
        r = self.rank(ops[0]) if ops else 0
        return self.b.map(ops, self.computation(len(ops)),
                          self.dim_list(r) if self.src.chance(0.4) else None)

    def m_sort(self) -> Any:
        ops = [self.op() for _ in range(self.i(1, 3))]
        comp = self.computation(2 * len(ops)) if self.src.chance(0.4) else None
        return self.b.sort(ops[0] if len(ops) == 1 and self.src.chance(0.5) else ops, comp,
                           self.arg_i(-2, 3), self.src.chance(0.5))

    def m_top_k(self) -> Any:
        return self.b.top_k(self.op(), self.arg_i(-1, 5), self.src.chance(0.5))

    def m_dot(self) -> Any:
        pet = self.any_type() if self.src.chance(0.2) else None
        return self.b.dot(self.op(), self.op(), None, pet)

    def m_dot_general(self) -> Any:
        lhs, rhs = self.op(), self.op()
        rl, rr = self.rank(lhs), self.rank(rhs)
        nb = self.i(0, 1)
        dn = xm.DotDimensionNumbers((self.dim_list(rl, self.i(0, 1))),
                                    (self.dim_list(rr, self.i(0, 1))),
                                    self.dim_list(rl, nb), self.dim_list(rr, nb))
        pet = self.any_type() if self.src.chance(0.2) else None
        return self.b.dot_general(lhs, rhs, dn, None, pet)

    def m_cholesky(self) -> Any:
        return self.b.cholesky(self.op(), self.src.chance(0.5))

    def m_triangular_solve(self) -> Any:
        return self.b.triangular_solve(self.op(), self.op(), self.src.chance(0.5),
                                       self.src.chance(0.5), self.src.chance(0.5),
                                       self.src.choice(["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT",
                                                        "BAD", 0]))

    def m_conv(self) -> Any:
        lhs, rhs = self.arr_op(), self.arr_op()
        r = self.rank(lhs)
        s = max(r - 2, 0)
        dn = None
        if self.src.chance(0.4):
            dn = self.src.choice([
                xm.ConvDimensionNumbers.from_layouts("NHWC", "HWIO", "NHWC") if r == 4 else None,
                xm.ConvDimensionNumbers(self.arg_i(-1, r), self.arg_i(-1, r), self.dim_list(r, s),
                                        self.arg_i(-1, r), self.arg_i(-1, r), self.dim_list(r, s),
                                        self.arg_i(-1, r), self.arg_i(-1, r), self.dim_list(r, s))])
        return self.b.conv_general_dilated(
            lhs, rhs, self.ints(s, 0, 2), self.padding(s),
            self.window(s), self.window(s), dn, self.arg_i(0, 2), self.arg_i(0, 2))

    def m_fft(self) -> Any:
        return self.b.fft(self.op(), self.src.choice(["FFT", "IFFT", "RFFT", "IRFFT", "BAD"]),
                          self.ints(self.i(0, 3), 0, 4))

    def m_batch_norm(self) -> Any:
        x = self.op()
        fi = self.arg_i(-1, self.rank(x))
        vecs = [self.op() for _ in range(5)]
        k = self.i(0, 2)
        if k == 0:
            return self.b.batch_norm_training(x, *vecs[:2], 1e-3, fi)
        if k == 1:
            return self.b.batch_norm_inference(x, *vecs[:4], 1e-3, fi)
        return self.b.batch_norm_grad(x, *vecs[:4], 1e-3, fi)

    def m_tuple(self) -> Any:
        return self.b.tuple([self.op() for _ in range(self.i(0, 3))])

    def m_get_tuple_element(self) -> Any:
        return self.b.get_tuple_element(self.op(), self.arg_i(-1, 3))

    def m_call(self) -> Any:
        ops = [self.op() for _ in range(self.i(0, 2))]
        return self.b.call(self.computation(len(ops)), ops)

    def m_while(self) -> Any:
        init = self.op()

        def cond(*ps: xm.XlaOp) -> Any:
            sb = ps[0].builder
            return self.src.choice([lambda: sb.constant(False), lambda: ps[0],
                                    lambda: sb.constant(np.zeros(2, bool))])()
        body = self.src.choice([lambda x: x, self.computation(1)])
        return self.b.while_(self.src.choice([cond, self.computation(1)]), body, init)

    def m_conditional(self) -> Any:
        idx = self.scalar_op(self.src.choice([xm.PRED, xm.S32, xm.F32]))
        n = self.i(0, 3)
        ops = [self.op() for _ in range(n if self.src.chance(0.8) else self.i(0, 3))]
        return self.b.conditional(idx, [self.computation(1) for _ in range(n)], ops)

    def m_rng(self) -> Any:
        k = self.i(0, 3)
        shape = self.shape()
        if k == 0:
            return self.b.rng_uniform(self.scalar_op(), self.scalar_op(), shape)
        if k == 1:
            return self.b.rng_normal(self.scalar_op(), self.scalar_op(), shape)
        if k == 2:
            return self.b.rng_bernoulli(self.scalar_op(), shape)
        return self.b.rng_bit_generator(self.src.choice(["DEFAULT", "THREE_FRY", "PHILOX", "X"]),
                                        self.op(), shape)

    def m_custom_call(self) -> Any:
        return self.b.custom_call(self.src.choice(["target", "", 3]), [self.op() for _ in range(2)],
                                  self.shape(), self.src.choice(["", "cfg"]), self.src.chance(0.3))

    def m_tokens(self) -> Any:
        k = self.i(0, 5)
        token = self.src.choice([None, self.b.create_token(), self.op()])
        if k == 0:
            return self.b.after_all([self.op() for _ in range(self.i(0, 2))] + [self.b.create_token()])
        if k == 1:
            return self.b.infeed(self.shape(), token)
        if k == 2:
            x = self.op()
            shape = x.shape if isinstance(x, xm.XlaOp) and self.src.chance(0.7) else self.shape()
            return self.b.outfeed(x, shape, "", token)
        if k == 3:
            return self.b.send(self.op(), self.src.choice([1, "ch", None, -1]), token)
        if k == 4:
            return self.b.recv(self.shape(), self.src.choice([1, "ch", None]), token)
        return self.b.create_token()

    def groups(self) -> Any:
        k = self.i(0, 4)
        if k == 0:
            return None
        if k == 1:
            return [[0, 1], [2, 3]]
        if k == 2:
            return [[self.i(-1, 4) for _ in range(self.i(0, 3))] for _ in range(self.i(0, 3))]
        return self.src.choice([[[0]], [[1, 0]], [[0, 1], [1, 2]], [[0, 1], [2]], "{}", [0, 1]])

    def m_collective(self) -> Any:
        k = self.i(0, 8)
        x, g = self.op(), self.groups()
        channel = self.src.choice([None, None, 1, 0, -2, "c"])
        if k == 0:
            return self.b.replica_id() if self.src.chance(0.5) else self.b.partition_id()
        if k == 1:
            return self.b.all_reduce(x if self.src.chance(0.7) else [x, self.op()],
                                     self.computation(self.src.choice([2, 4])), g, channel)
        if k == 2:
            return self.b.cross_replica_sum(x, g)
        if k == 3:
            return self.b.all_gather(x, self.arg_i(-1, 3), self.arg_i(0, 4), g, channel)
        if k == 4:
            return self.b.all_to_all(x, self.arg_i(-1, 3), self.arg_i(-1, 3), self.arg_i(0, 4), g, channel)
        if k == 5:
            return self.b.reduce_scatter(x, self.computation(2), self.arg_i(-1, 3), self.arg_i(0, 4), g,
                                         channel)
        if k == 6:
            pairs = [(self.i(-1, 4), self.i(-1, 4)) for _ in range(self.i(0, 3))]
            return self.b.collective_permute(x, self.src.choice([pairs, [(0,)], "01"]), channel)
        return self.b.collective_broadcast(x, g, channel)

    # ---- one case --------------------------------------------------------------------------------

    def call(self, name: str) -> None:
        out = self.outcome
        out.calls += 1
        method = getattr(self, "m_" + name)
        try:
            result = self._with_garbage(method)
        except xm.ShapeError as e:
            out.shape_errors += 1
            out.trace.append(f"{name}: ShapeError: {str(e)[:200]}")
            return
        except Exception as e:  # noqa: BLE001 - anything else is what we are looking for
            out.trace.append(f"{name}: {type(e).__name__}: {e}")
            out.failure = f"{name} raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
            return
        if not isinstance(result, xm.XlaOp):
            out.failure = f"{name} returned {type(result).__name__}, not an XlaOp"
            return
        out.ok += 1
        out.trace.append(f"{name}: {result.shape}")
        self.pool.append(result)

    def _with_garbage(self, method: Callable[[], Any]) -> Any:
        """Run `method`; now and then one of the values it draws is swapped for garbage."""
        if not self.src.chance(self.garbage * 10):
            return method()
        # Swap the op picked and the int lists drawn for garbage at a raised rate.
        saved_op, saved_ints = self.op, self.ints

        def op() -> Any:
            return self.maybe_garbage(saved_op())

        def ints(n: int | None = None, lo: int = -1, hi: int = 4) -> Any:
            return self.maybe_garbage(saved_ints(n, lo, hi))
        self.op, self.ints, rate = op, ints, self.garbage  # type: ignore[method-assign]
        self.garbage = 0.3
        try:
            return method()
        finally:
            del self.op, self.ints
            self.garbage = rate

    def run(self) -> Outcome:
        out = self.outcome
        for k in range(self.i(0, 2)):
            self.pool.append(self.b.parameter(k, self.shape()))
        for _ in range(self.i(0, 2)):
            self.pool.append(self.b.constant(np.ones(self.dims_for(self.i(0, 2)),
                                                     xm.dtype_of(self.etype()))))
        for _ in range(self.i(1, self.steps)):
            self.call(self.src.choice(self.methods))
            if out.failure:
                return out
        self.finish()
        return out

    def finish(self) -> None:
        out = self.outcome
        root: Any = None
        if self.pool and self.src.chance(0.9):
            root = self.op() if self.src.chance(0.8) else [self.op() for _ in range(self.i(0, 3))]
        try:
            computation = self.b.build(root)
        except xm.ShapeError as e:
            out.build_shape_error = True
            out.trace.append(f"build: ShapeError: {str(e)[:200]}")
            return
        except Exception as e:  # noqa: BLE001
            out.failure = f"build raised {type(e).__name__}: {e}\n{traceback.format_exc()}"
            return
        out.built = True
        text = out.text = computation.as_mlir_text()
        try:
            with new_context(), ir.Location.unknown():
                verify_module(ir.Module.parse(text))
        except xm.CompileError as e:
            # A token parameter is fine in a computation (a while body's state, say); only an
            # entry computation cannot take one, and compile() says so.
            if "cannot take a token parameter" not in str(e):
                out.failure = f"the built module does not verify: {e}\n{text}"
        except Exception as e:  # noqa: BLE001
            out.failure = (f"the built module does not verify: {type(e).__name__}: {e}\n"
                           f"{text}")


def run_case(src: Source, steps: int = 8, garbage: float = 0.03) -> Outcome:
    """One random computation built from `src`'s choices; see the module docstring."""
    return Fuzzer(src, steps, garbage).run()
