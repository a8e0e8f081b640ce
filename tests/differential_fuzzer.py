"""Random valid computations for differential testing against tests/reference.py.

`make_case(src)` builds one computation (elementwise chains, implicit and explicit
broadcasts, reductions, slices and `x[...]`, reverse, pad, concatenate, reshape,
transpose, dot_general, select, clamp, compare, convert, dynamic slices, iota) from
a few parameters and constants, with arguments for it. Integer inputs include
zeros and the type's extremes now and then, so XLA's defined results for x/0,
INT_MIN/-1 and over-wide shifts are exercised too.

Every float value carries a bound on its magnitude and an `exact` flag: values
built from small integers by exact ops (add, mul, max, select, data movement...)
stay exact while the bound is below 2^20, and only exact values go through
discontinuous ops (floor, sign, compare, float->int convert), so a last-bit
difference in exp or tanh cannot flip a comparison. `check_case` compiles the
computation, runs it, and compares every result leaf with the interpreter's:
bit-exact for integers, predicates and exact floats, to a tolerance scaled by
the bound otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from builder_fuzzer import Source
from differential_fuzzer_narrow import NarrowOps
from differential_fuzzer_ops import CUSTOM_CALLS, StructuredOps
from guarded_results import guarded_call
from reference import evaluate

import xlamlir as xm
from xlamlir.lowering.passes import outline_nests
from xlamlir.runtime import split_jit as split_jit_module

FLOATS = [np.dtype(np.float32), np.dtype(np.float64)]
# Drawn less often. Not bf16: numpy gives it kind 'V', so every `kind == "f"` test here
# (exactness, total-order sort keys, tolerances) would need a special case.
HALF = [np.dtype(np.float16)]
INTS = [np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.uint32),
        np.dtype(np.int64), np.dtype(np.int16), np.dtype(np.uint16)]
BOOL = np.dtype(np.bool_)
EXACT_LIMIT = 2.0**20
# Integers up to 2^p are exact in a p-bit significand; above, sums round.
EXACT_LIMITS = {np.dtype(np.float16): 2.0**11}
UNSIGNED_UNARY = ["neg", "not_", "population_count", "clz", "sign"]
INF = math.inf


@dataclass
class Value:
    op: xm.XlaOp
    bound: float  # |value| <= bound (floats; ints: inf once they may wrap)
    exact: bool  # floats: equal to the exact real result
    # A non-key result of an unstable sort by key `tied_to` along `tie_dim`: only the multiset
    # of values within each run of equal keys is determined. Returned, never an operand.
    tied_to: Value | None = None
    tie_dim: int = 0
    # An inexact float one rounding from exact operands: compared within this many units in
    # the last place (0 for IEEE's correctly rounded ops), not with the bound-based tolerance.
    ulps: float | None = None

    @property
    def dtype(self) -> np.dtype:
        return self.op.shape.dtype

    @property
    def dims(self) -> tuple[int, ...]:
        return self.op.shape.dimensions


@dataclass
class Case:
    computation: xm.XlaComputation
    args: list[np.ndarray]
    roots: list[Value]
    trace: list[str] = field(default_factory=list)


def exact_limit(dtype: np.dtype) -> float:
    return EXACT_LIMITS.get(np.dtype(dtype), EXACT_LIMIT)


class Generator(StructuredOps, NarrowOps):
    def __init__(self, src: Source, max_ops: int = 10) -> None:
        self.src = src
        self.max_ops = max_ops
        self.rng = np.random.default_rng(src.integer(0, 2**31 - 1))
        self.b = xm.XlaBuilder("diff")
        self.pool: list[Value] = []
        self.args: list[np.ndarray] = []
        self.trace: list[str] = []
        self.wanted: list[Value] = []  # values returned beside the last one (multiple results)
        self.large = src.chance(0.3)  # some cases have one dimension of vector size

    # ---- inputs -------------------------------------------------------------------------------

    def dims(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.src.integer(0, 3) if rank is None else rank
        dims = tuple(self.src.integer(1, 4) if self.src.chance(0.95) else 0 for _ in range(rank))
        if self.large and rank and self.src.chance(0.5):
            # Sizes around the vector width (16 f32 lanes): full vectors, partial tails.
            at = self.src.integer(0, rank - 1)
            big = self.src.choice([7, 8, 9, 15, 16, 17, 31, 33, 64])
            if math.prod(dims) * big <= 4096:
                dims = dims[:at] + (big,) + dims[at + 1:]
        return dims

    def data(self, dtype: np.dtype, dims: Sequence[int]) -> tuple[np.ndarray, float, bool]:
        dims = tuple(dims)
        if dtype == BOOL:
            return self.rng.random(dims) < 0.5, 1.0, True
        if dtype.kind == "f":
            scale = 0.5 if self.src.chance(0.3) else 1.0
            return (self.rng.integers(-6, 7, dims) * scale).astype(dtype), 6.0, True
        info = np.iinfo(dtype)
        lo = max(info.min, -9)
        values = self.rng.integers(lo, 10, dims, endpoint=True).astype(dtype)
        if self.src.chance(0.3) and values.size:
            # The type's extremes and zeros: XLA's defined results for x/0, INT_MIN/-1...
            special = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1], dtype)
            mask = self.rng.random(dims) < 0.3
            values[mask] = special[self.rng.integers(0, 4, dims)][mask].astype(dtype)
            return values, INF, True
        return values, 10.0, True

    def new_input(self, dtype: np.dtype, dims: Sequence[int]) -> Value:
        values, bound, exact = self.data(dtype, dims)
        if self.src.chance(0.15) and values.ndim:
            # A broadcast scalar constant: several of them with equal values may be merged.
            scalar = values.reshape(-1)[:1].reshape(()) if values.size else self.data(dtype, ())[0]
            op = self.b.broadcast(self.b.constant(scalar), list(dims))
            self.trace.append(f"broadcast constant {scalar} {op.shape}")
            v = Value(op, bound, exact)
            self.pool.append(v)
            return v
        if self.src.chance(0.6):
            op = self.b.parameter(len(self.args), xm.Shape.array(dtype, values.shape))
            self.args.append(values)
            self.trace.append(f"p{len(self.args) - 1} = parameter {op.shape}")
        else:
            op = self.b.constant(values)
            self.trace.append(f"constant {op.shape}")
        v = Value(op, bound, exact)
        self.pool.append(v)
        return v

    # ---- picking operands -------------------------------------------------------------------

    def pick(self, want=None) -> Value:
        candidates = [v for v in self.pool if want is None or want(v)]
        if not candidates:
            return None  # type: ignore[return-value]
        if self.src.chance(0.6):
            return candidates[-1 - self.src.integer(0, min(len(candidates) - 1, 3))]
        return self.src.choice(candidates)

    def partner(self, x: Value, same_dtype: bool = True) -> Value:
        """A value of x's shape (and dtype): from the pool, or a fresh input."""
        like = self.pick(lambda v: v is not x and v.dims == x.dims and v.dtype == x.dtype)
        if like is not None and self.src.chance(0.7):
            return like
        return self.new_input(x.dtype, x.dims)

    def add(self, op: xm.XlaOp, bound: float, exact: bool, what: str,
            ulps: float | None = None) -> Value:
        if op.shape.dtype.kind == "f":
            exact = exact and bound < exact_limit(op.shape.dtype)
        v = Value(op, bound, exact, ulps=None if exact else ulps)
        self.pool.append(v)
        note = "" if exact else " (inexact)" if v.ulps is None else f" (within {v.ulps:g} ulp)"
        self.trace.append(f"{what} -> {op.shape}{note}")
        return v

    def function_ulps(self, x: Value) -> float | None:
        """The ulp budget of one transcendental function of x: none unless x is exact."""
        if not x.exact:
            return None
        return 1.0 if x.dtype == np.float16 else 4.0

    # ---- ops --------------------------------------------------------------------------------

    def g_unary(self) -> Value:
        x = self.pick()
        b = self.b
        if x.dtype == BOOL:
            return self.add(b.not_(x.op), 1, True, "not")
        if x.dtype.kind in "iu":
            name = self.src.choice(["abs", "neg", "not_", "population_count", "clz", "sign"]
                                   if x.dtype.kind == "i" else UNSIGNED_UNARY)
            bound = x.bound if name in ("abs", "neg", "sign") and x.bound < INF else INF
            if x.dtype.kind == "u" and name == "neg":
                bound = INF
            return self.add(getattr(b, name)(x.op), bound, True, name)
        if x.exact and self.src.chance(0.5):
            name = self.src.choice(["abs", "neg", "floor", "ceil", "round_nearest_even",
                                    "round_nearest_afz", "sign"])
            return self.add(getattr(b, name)(x.op), x.bound + 1, True, name)
        name = self.src.choice(["tanh", "sin", "cos", "logistic", "atan", "exp", "sqrt", "log",
                                "abs", "neg"])
        op = x.op
        ulps = self.function_ulps(x) if name not in ("abs", "neg") else (0.0 if x.exact else None)
        if name == "exp" and x.bound > (20 if x.dtype in FLOATS else 8):
            op = b.tanh(op)
            ulps = None  # two roundings, the second amplified
        if name in ("sqrt", "log"):
            op = b.add(b.abs(op), b.constant(np.ones((), x.dtype)))  # keep away from 0 and NaN
        bound = {"exp": math.exp(min(x.bound, 20)), "sqrt": math.sqrt(x.bound + 1),
                 "log": math.log(x.bound + 1) + 1, "abs": x.bound, "neg": x.bound}.get(name, 2.0)
        if name == "sqrt" and ulps is not None:
            ulps = 0.0  # IEEE: correctly rounded
        return self.add(getattr(b, name)(op), bound, False, name, ulps)

    def g_binary(self) -> Value:
        x = self.pick()
        b = self.b
        y = self.partner(x)
        if self.src.chance(0.2):  # a Python scalar through the overloads
            k = self.src.integer(-3, 3)
            if x.dtype.kind == "u":
                k = abs(k)
            y = Value(b.constant(np.array(k, x.dtype)), abs(k), True)
        if x.dtype == BOOL:
            name = self.src.choice(["and_", "or_", "xor", "max", "min"])
            return self.add(getattr(b, name)(x.op, y.op), 1, True, name)
        if x.dtype.kind in "iu":
            name = self.src.choice(["add", "sub", "mul", "div", "rem", "max", "min", "and_", "or_",
                                    "xor", "shift_left", "shift_right_arithmetic",
                                    "shift_right_logical"])
            small = x.bound < INF and y.bound < INF and not (x.dtype.kind == "u" and name == "sub")
            bound = {"add": x.bound + y.bound, "sub": x.bound + y.bound, "mul": x.bound * y.bound,
                     "div": x.bound, "rem": x.bound, "max": max(x.bound, y.bound),
                     "min": max(x.bound, y.bound)}.get(name, INF) if small else INF
            info = np.iinfo(x.dtype)
            if bound >= min(info.max, 2**31):
                bound = INF
            return self.add(getattr(b, name)(x.op, y.op), bound, True, name)
        name = self.src.choice(["add", "sub", "mul", "div", "max", "min", "rem", "pow", "atan2"])
        exact = x.exact and y.exact
        if name in ("add", "sub"):
            return self.add(getattr(b, name)(x.op, y.op), x.bound + y.bound, exact, name)
        if name == "mul":
            return self.add(b.mul(x.op, y.op), x.bound * y.bound, exact, name)
        if name in ("max", "min"):
            return self.add(getattr(b, name)(x.op, y.op), max(x.bound, y.bound), exact, name)
        one = b.constant(np.ones((), x.dtype))
        if name == "div":  # |y| + 1 >= 1: no inf/NaN, bound stays finite
            return self.add(b.div(x.op, b.add(b.abs(y.op), one)), x.bound, False, name,
                            0.0 if exact else None)  # IEEE: correctly rounded
        if name == "rem":
            return self.add(b.rem(x.op, b.add(b.abs(y.op), one)), x.bound, exact, name)
        if name == "pow":  # (|x| + 1) ** tanh(y): positive base, exponent in (-1, 1)
            return self.add(b.pow(b.add(b.abs(x.op), one), b.tanh(y.op)), x.bound + 1, False, name)
        if not exact:
            # atan2 jumps by pi across a zero operand (and by 2 pi across the negative x
            # axis): an inexact operand's sign error near zero is no ulps away (an irfft's
            # +-1e-17, seed 971711). Its operands are exact here, as compare's are.
            x = x if x.exact else self.new_input(x.dtype, x.dims)
            y = y if y.exact else self.new_input(y.dtype, y.dims)
        return self.add(b.atan2(x.op, y.op), 4.0, False, name, self.function_ulps(x))

    def g_broadcast_binary(self) -> Value:
        """A lower-rank operand mapped in with broadcast_dimensions, or a size-1 dimension."""
        x = self.pick(lambda v: v.op.shape.rank >= 1 and v.dtype.kind in "fiu")
        if x is None:
            return self.g_binary()
        rank = x.op.shape.rank
        keep = [d for d in range(rank) if self.src.chance(0.5)]
        if len(keep) == rank:
            keep = keep[:-1]
        y = self.new_input(x.dtype, [x.dims[d] for d in keep])
        name = self.src.choice(["add", "mul", "max", "sub"])
        exact = x.exact and y.exact
        bound = x.bound * y.bound if name == "mul" else x.bound + y.bound
        if self.src.chance(0.5):
            op = getattr(self.b, name)(x.op, y.op, keep)
        else:
            op = getattr(self.b, name)(y.op, x.op, keep)
        return self.add(op, bound, exact, f"{name} broadcast_dimensions={keep}")

    def g_compare(self) -> Value:
        x = self.pick(lambda v: v.dtype != BOOL and (v.dtype.kind != "f" or v.exact))
        if x is None:
            return self.g_unary()
        y = self.partner(x)
        if y.dtype.kind == "f" and not y.exact:
            # An exact x against an inexact partner (an fft round trip of x, seed 800142): a
            # rounding error of one ulp flips LE, and a pred has no tolerance.
            y = self.new_input(x.dtype, x.dims)
        d = self.src.choice(["EQ", "NE", "LT", "LE", "GT", "GE"])
        return self.add(self.b.compare(x.op, y.op, d), 1, True, f"compare {d}")

    def g_select(self) -> Value:
        x = self.pick()
        y = self.partner(x)
        pred = self.pick(lambda v: v.dtype == BOOL and v.dims in (x.dims, ()))
        if pred is None:
            pred = self.new_input(BOOL, x.dims if self.src.chance(0.8) else ())
        return self.add(self.b.select(pred.op, x.op, y.op), max(x.bound, y.bound),
                        x.exact and y.exact, "select")

    def g_clamp(self) -> Value:
        x = self.pick(lambda v: v.dtype != BOOL)
        if x is None:
            return self.g_unary()
        lo, hi = sorted(self.src.integer(-5, 5) for _ in range(2))
        if x.dtype.kind == "u":
            lo, hi = abs(lo), abs(lo) + abs(hi)
        lo_op = self.b.constant(np.array(lo, x.dtype))
        hi_op = self.b.constant(np.array(hi, x.dtype))
        return self.add(self.b.clamp(lo_op, x.op, hi_op), max(abs(lo), abs(hi)), x.exact,
                        f"clamp [{lo}, {hi}]")

    def g_convert(self) -> Value:
        x = self.pick()
        target = self.src.choice(FLOATS + HALF + INTS + [BOOL])
        if x.dtype.kind == "f" and target.kind in "iub" and not x.exact:
            target = self.src.choice(FLOATS)  # rounding could flip an inexact value's integer part
        if x.dtype.kind == "f" and not x.exact and target.kind == "f" and \
                target.itemsize > x.dtype.itemsize:
            target = x.dtype  # an f32 rounding error would be judged by f64's tolerance
        op = self.b.convert_element_type(x.op, target)
        if target == BOOL:
            return self.add(op, 1, True, "convert pred")
        if target.kind in "iu":
            info = np.iinfo(target)
            fits = x.bound < INF and x.bound <= min(info.max, 2**31) and (
                target.kind == "i" or x.dtype.kind == "u" or x.dtype == BOOL)
            return self.add(op, x.bound if fits else INF, True, f"convert {target}")
        exact = x.exact and x.bound < exact_limit(target)
        if target in HALF and x.bound >= 60000:
            return self.add(op, INF, False, f"convert {target}")
        return self.add(op, x.bound if x.bound < INF else 2.0**64, exact, f"convert {target}")

    def g_broadcast_in_dim(self) -> Value:
        x = self.pick()
        out = list(x.dims)
        mapping = list(range(len(out)))
        for _ in range(self.src.integer(1, 2)):
            if len(out) >= 4:
                break
            at = self.src.integer(0, len(out))
            out.insert(at, self.src.integer(1, 3))
            mapping = [m + 1 if m >= at else m for m in mapping]
        for i, m in enumerate(mapping):  # a size-1 dimension may grow
            if x.dims[i] == 1 and self.src.chance(0.3):
                out[m] = 3
        op = self.b.broadcast_in_dim(x.op, out, mapping)
        return self.add(op, x.bound, x.exact, f"broadcast_in_dim {out} {mapping}")

    def g_reshape(self) -> Value:
        x = self.pick()
        n = x.op.shape.numel
        options = [[n], [1, n], [n, 1]]
        for f in range(2, n):
            if n % f == 0:
                options.append([f, n // f])
        if n == 0:
            options = [[0], [0, 3]]
        sizes = self.src.choice(options)
        return self.add(self.b.reshape(x.op, sizes), x.bound, x.exact, f"reshape {sizes}")

    def g_transpose(self) -> Value:
        x = self.pick()
        perm = list(range(x.op.shape.rank))
        for k in range(len(perm) - 1, 0, -1):
            j = self.src.integer(0, k)
            perm[k], perm[j] = perm[j], perm[k]
        return self.add(self.b.transpose(x.op, perm), x.bound, x.exact, f"transpose {perm}")

    def g_slice(self) -> Value:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_broadcast_in_dim()
        if self.src.chance(0.5):  # x[...] with any step
            index = []
            for d in x.dims:
                if self.src.chance(0.2) and d:
                    index.append(self.src.integer(-d, d - 1))
                else:
                    index.append(slice(self.src.choice([None, 0, 1, -1]),
                                       self.src.choice([None, d, -1, 2]),
                                       self.src.choice([None, 1, 2, -1, -2])))
            return self.add(x.op[tuple(index)], x.bound, x.exact, f"index {index}")
        starts, limits, strides = [], [], []
        for d in x.dims:
            s = self.src.integer(0, d)
            starts.append(s)
            limits.append(self.src.integer(s, d))
            strides.append(self.src.integer(1, 3))
        return self.add(self.b.slice(x.op, starts, limits, strides), x.bound, x.exact,
                        f"slice {starts} {limits} {strides}")

    def g_rev(self) -> Value:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        dims = [d for d in range(x.op.shape.rank) if self.src.chance(0.5)] or [0]
        return self.add(self.b.rev(x.op, dims), x.bound, x.exact, f"rev {dims}")

    def g_concat(self) -> Value:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        dim = self.src.integer(0, x.op.shape.rank - 1)
        other_dims = list(x.dims)
        other_dims[dim] = self.src.integer(0, 3)
        y = self.new_input(x.dtype, other_dims) if self.src.chance(0.6) else x
        ops = [x.op, y.op] if self.src.chance(0.5) else [y.op, x.op, x.op]
        return self.add(self.b.concat_in_dim(ops, dim), max(x.bound, y.bound), x.exact and y.exact,
                        f"concat dim {dim}")

    def g_pad(self) -> Value:
        x = self.pick()
        config = []
        for d in x.dims:
            low, high = self.src.integer(-1, 2), self.src.integer(-1, 2)
            interior = self.src.integer(0, 2)
            grown = d + max(d - 1, 0) * interior
            low, high = max(low, -grown), max(high, -grown - low if low < 0 else -grown)
            if grown + low + high < 0:
                low, high = 0, 0
            config.append((low, high, interior))
        value = self.data(x.dtype, ())[0]
        op = self.b.pad(x.op, self.b.constant(value), config)
        return self.add(op, max(x.bound, 10), x.exact, f"pad {config}")

    def g_iota(self) -> Value:
        dims = self.dims(self.src.integer(1, 3))
        dtype = self.src.choice([np.dtype(np.int32), np.dtype(np.float32), np.dtype(np.uint8)])
        k = self.src.integer(0, len(dims) - 1)
        return self.add(self.b.iota(xm.Shape.array(dtype, dims), k), max(dims), True,
                        f"iota {dims} {k}")

    def g_dot(self) -> Value:
        if self.src.chance(0.3):
            return self.few_rows_product()
        x = self.pick(lambda v: 1 <= v.op.shape.rank <= 3 and v.dtype != BOOL)
        if x is None:
            x = self.new_input(self.src.choice(FLOATS + [np.dtype(np.int32)]), self.dims(2))
            if x.op.shape.rank == 0:
                return x
        r = x.op.shape.rank
        contract = self.src.integer(0, r - 1)
        batch = [d for d in range(r) if d != contract and self.src.chance(0.3)][:1]
        free = self.src.integer(0, 1)
        rhs_dims = [x.dims[d] for d in batch] + [x.dims[contract]] + [self.src.integer(1, 3)] * free
        # Put the rhs dimensions in a random order.
        order = list(range(len(rhs_dims)))
        for k in range(len(order) - 1, 0, -1):
            j = self.src.integer(0, k)
            order[k], order[j] = order[j], order[k]
        y = self.new_input(x.dtype, [rhs_dims[i] for i in order])
        where = {i: order.index(i) for i in range(len(order))}
        dn = xm.DotDimensionNumbers([contract], [where[len(batch)]], batch,
                                    [where[i] for i in range(len(batch))])
        op = self.b.dot_general(x.op, y.op, dn)
        k = x.dims[contract]
        bound = x.bound * y.bound * max(k, 1)
        if x.dtype.kind in "iu" and bound >= min(np.iinfo(x.dtype).max, 2**31):
            bound = INF
        return self.add(op, bound, x.exact and y.exact, f"dot_general {dn}")

    def few_rows_product(self) -> Value:
        """A vector or 1-4 rows times a matrix of whole vectors of columns (16, 32, 48):
        lowering/ops/few_rows.py for f32/f64."""
        x = self.pick(lambda v: v.op.shape.rank in (1, 2) and v.dtype in FLOATS
                      and (v.op.shape.rank == 1 or 1 <= v.dims[0] <= 4) and v.dims[-1] >= 1)
        if x is None:
            dtype = self.src.choice(FLOATS)
            dims = [self.src.integer(1, 6)] if self.src.chance(0.5) else \
                [self.src.integer(1, 4), self.src.integer(1, 6)]
            x = self.new_input(dtype, dims)
        k = x.dims[-1]
        y = self.new_input(x.dtype, [k, 16 * self.src.integer(1, 3)])
        dn = xm.DotDimensionNumbers([x.op.shape.rank - 1], [0])
        op = self.b.dot_general(x.op, y.op, dn)
        return self.add(op, x.bound * y.bound * k, x.exact and y.exact, f"few rows dot {dn}")

    def g_reduce(self) -> Value:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        dims = [d for d in range(x.op.shape.rank) if self.src.chance(0.5)] or [0]
        dt = x.dtype
        if dt == BOOL:
            kind = self.src.choice(["and", "or"])
        else:
            kind = self.src.choice(["add", "max", "min", "mul"])
        if dt == BOOL:
            init = np.array(kind == "and")
        elif kind == "add":
            init = np.zeros((), dt)
        elif kind == "mul":
            init = np.ones((), dt)
        elif dt.kind == "f":
            init = np.array(-np.inf if kind == "max" else np.inf, dt)
        else:
            info = np.iinfo(dt)
            init = np.array(info.min if kind == "max" else info.max, dt)

        def reducer(a: xm.XlaOp, c: xm.XlaOp) -> xm.XlaOp:
            sb = a.builder
            return {"add": sb.add, "mul": sb.mul, "max": sb.max, "min": sb.min, "and": sb.and_,
                    "or": sb.or_}[kind](a, c)

        n = math.prod(x.dims[d] for d in dims)
        power = INF if x.bound > 1 and n * math.log(x.bound) > 700 else x.bound ** n  # no float overflow
        bound = {"add": x.bound * n, "mul": power if x.bound > 1 else 1}.get(kind, x.bound)
        if n == 0 and kind in ("max", "min") and dt.kind == "f":
            bound = INF  # an empty max is -inf
        if dt.kind in "iu" and (bound >= min(np.iinfo(dt).max, 2**31) or n == 0):
            bound = INF
        op = self.b.reduce(x.op, self.b.constant(init), reducer, dims)
        exact = x.exact if kind in ("max", "min") else x.exact and bound < exact_limit(dt)
        return self.add(op, bound, exact, f"reduce {kind} {dims}")

    def g_dynamic_slice(self) -> Value:
        x = self.pick(lambda v: v.op.shape.rank >= 1)
        if x is None:
            return self.g_unary()
        starts = []
        for _ in x.dims:
            s = np.int32(self.src.integer(-3, 5))  # out of range clamps
            if self.src.chance(0.5):
                starts.append(self.b.constant(s))
            else:
                starts.append(self.b.parameter(len(self.args), xm.Shape.array(xm.S32, ())))
                self.args.append(np.array(s))
        if self.src.chance(0.5):
            sizes = [self.src.integer(0, d) for d in x.dims]
            return self.add(self.b.dynamic_slice(x.op, starts, sizes), x.bound, x.exact,
                            f"dynamic_slice {sizes}")
        u = self.new_input(x.dtype, [self.src.integer(0, d) for d in x.dims])
        return self.add(self.b.dynamic_update_slice(x.op, u.op, starts), max(x.bound, u.bound),
                        x.exact and u.exact, "dynamic_update_slice")

    # ---- a case -------------------------------------------------------------------------------

    GENERATORS = ("unary", "unary", "binary", "binary", "binary", "broadcast_binary", "compare",
                  "select", "clamp", "convert", "broadcast_in_dim", "reshape", "transpose",
                  "slice", "rev", "concat", "pad", "iota", "dot", "dot", "reduce", "reduce",
                  "dynamic_slice",
                  # structured families (differential_fuzzer_ops.py)
                  "gather", "gather", "scatter", "scatter", "sort", "sort", "while", "conditional",
                  "call", "map", "argmax", "reduce_window", "reduce_window", "select_and_scatter",
                  "conv", "conv", "fft", "cholesky", "triangular_solve", "batch_norm", "bits", "top_k",
                  "rng_bit_generator", "collective", "custom_call", "scan", "composite_call",
                  "ragged_dot", "scaled_dot", "narrow", "narrow", "row_norm",
                  "twin", "twin", "twin")

    def make(self) -> Case:
        for _ in range(self.src.integer(1, 2)):
            dtype = self.src.choice(FLOATS + FLOATS + INTS + [BOOL] + HALF)
            self.new_input(dtype, self.dims())
        for _ in range(self.src.integer(1, self.max_ops)):
            getattr(self, "g_" + self.src.choice(self.GENERATORS))()
        roots = [self.pool[-1]] + [v for v in self.wanted if v is not self.pool[-1]]
        if self.src.chance(0.25) and len(self.pool) > 1:
            roots.append(self.src.choice(self.pool[:-1]))
        params = [v for v in self.pool if v.op.parameter_number is not None]
        if params and self.src.chance(0.2):  # a parameter returned beside ops of it
            roots.append(self.src.choice(params))
        if self.src.chance(0.1):  # one value returned twice
            roots.append(roots[0])
        computation = self.b.build(roots[0].op if len(roots) == 1 else [r.op for r in roots])
        return Case(computation, self.args, roots, self.trace)


def make_case(src: Source, max_ops: int = 10) -> Case:
    return Generator(src, max_ops).make()


def compare_leaf(got: Any, want: Any, value: Value) -> str | None:
    """None if `got` matches the reference `want` for this value, else a description."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"result {got.dtype}{list(got.shape)}, reference {want.dtype}{list(want.shape)}"
    if want.dtype.kind != "f" or value.exact:
        if np.array_equal(got, want, equal_nan=want.dtype.kind == "f"):
            return None
        bad = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))
                            if want.dtype.kind == "f" else got == want))
        idx = tuple(bad[0]) if len(bad) else ()
        return (f"{len(bad)} element(s) differ, first at {idx}: got {got[idx]!r}, "
                f"reference {want[idx]!r}")
    if value.ulps is not None:
        g64, w64 = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore"):
            distance = np.abs(g64 - w64) / np.spacing(np.abs(want)).astype(np.float64)
        ok = (g64 == w64) | (np.isnan(g64) & np.isnan(w64)) | (distance <= value.ulps)
        if ok.all():
            return None
        idx = tuple(np.argwhere(~ok)[0])
        return (f"{int((~ok).sum())} element(s) differ by more than {value.ulps:g} ulp, first at "
                f"{idx}: got {got[idx]!r}, reference {want[idx]!r}")
    eps = float(np.finfo(want.dtype).eps)
    scale = value.bound
    # Unbounded (an inf somewhere; NaN when a bound met inf - inf or 0 * inf): the finite
    # values' own magnitude. A NaN atol made np.isclose an exact comparison.
    if scale == INF or scale != scale:
        finite = np.abs(want[np.isfinite(want)].astype(np.float64))
        scale = float(finite.max()) if finite.size else 1.0
    atol = 1024 * eps * max(scale, 1.0)
    rtol = {np.dtype(np.float32): 1e-3, np.dtype(np.float16): 4e-3}.get(want.dtype, 1e-9)
    # In float64: an f16 difference of two values near its maximum would overflow.
    ok = np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                    equal_nan=True)
    if ok.all():
        return None
    idx = tuple(np.argwhere(~ok)[0])
    return (f"{int((~ok).sum())} element(s) differ beyond rtol={rtol} atol={atol:.3g}, first at "
            f"{idx}: got {got[idx]!r}, reference {want[idx]!r}")


def canonical_ties(values: np.ndarray, keys: np.ndarray, dim: int) -> np.ndarray:
    """`values` with each run of equal (sorted) keys along `dim` sorted by value, so two
    results of an unstable sort that differ only in the order of ties compare equal."""
    if values.shape != keys.shape or values.ndim == 0:
        return values
    v = np.moveaxis(values.copy(), dim, -1)
    k = np.moveaxis(keys, dim, -1)
    for row in np.ndindex(*v.shape[:-1]):
        bounds = [0] + [i for i in range(1, k.shape[-1]) if k[row][i] != k[row][i - 1]] + [k.shape[-1]]
        for lo, hi in zip(bounds, bounds[1:]):
            v[row][lo:hi] = np.sort(v[row][lo:hi])
    return np.moveaxis(v, -1, dim)


def check_case(case: Case, split_jit: bool = False) -> str | None:
    """Compile and run `case`; None if it matches the reference interpreter, else why not.
    `split_jit`: every parallel loop's body compiled by the second engine, however small
    (runtime/split_jit.py: the program's machine code in two modules linked by slots),
    and every loop nest of the entry function up to half its size outlined for it
    (lowering/passes/outline_nests.py), however small."""
    if split_jit:
        knobs = [(split_jit_module, "MIN_GAIN_OPS", 1), (outline_nests, "FUNCTION_MIN_OPS", 0),
                 (outline_nests, "FUNCTION_SHARE", 0.0), (outline_nests, "NEST_MIN_OPS", 1)]
        saved = [getattr(module, name) for module, name, _ in knobs]
        for module, name, value in knobs:
            setattr(module, name, value)
        try:
            exe = xm.compile(case.computation)
        finally:
            for (module, name, _), value in zip(knobs, saved):
                setattr(module, name, value)
    else:
        exe = xm.compile(case.computation)
    got = exe(*case.args)
    # Again with guarded result buffers: a kernel writing past a result's end may still
    # return the right values (LLVM's masked-store bug: lowering/passes/masked_stores.py).
    _, outside = guarded_call(exe, case.args)
    if outside:
        return "; ".join(outside)
    want = evaluate(case.computation, case.args, CUSTOM_CALLS)
    if len(case.roots) == 1:
        got, want = (got,), (want,)
    for k, (g, w, v) in enumerate(zip(got, want, case.roots)):
        if v.tied_to is not None:
            keys = np.asarray(want[[r is v.tied_to for r in case.roots].index(True)])
            g, w = (canonical_ties(np.asarray(x), keys, v.tie_dim) for x in (g, w))
        problem = compare_leaf(g, w, v)
        if problem:
            return f"result {k}: {problem}"
    return None
