"""The differential fuzzer's narrow element types, a mixin of differential_fuzzer.Generator.

`g_narrow` converts a pool value to a sub-byte integer (s2, s4, u2, u4) or a narrow float
(the f8 types, f4e2m1fn, f8e8m0fnu, and bf16, which numpy also calls kind 'V'),
computes a few ops in that type (arithmetic, bitwise ops, compares and selects, data
movement, max/min reductions, a dot, a conversion to another narrow type) with fresh
operands of the type, and converts the result back to a wide type for the pool. The
rest of the generator never sees a narrow value: numpy calls their dtypes kind 'V',
which its exactness rules do not know.

Every result is determined bit for bit (docs/numerics.md): the narrow floats compute in
f32 and round once per op, so only ops whose f32 result is exact before that rounding are
drawn (add, sub, mul, max, min; no division, no transcendental functions, no sum
reductions, whose order would matter after per-step rounding); a dot sums in f32 and
rounds once, so it is drawn only while every sum of products is exact in f32 (the
values are multiples of 2^-3 at most three multiplies from the inputs' halves, and
bounded). Non-finite results (overflow, f8e8m0fnu's missing zero) are replaced by 0
after the conversion back, and the result is clamped, so the pool value stays exact.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

import xlamlir as xm

SUB_BYTE = [np.dtype(t) for t in (ml_dtypes.int2, ml_dtypes.int4, ml_dtypes.uint2, ml_dtypes.uint4)]
NARROW_FLOATS = [np.dtype(t) for t in (
    ml_dtypes.float8_e5m2, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3b11fnuz,
    ml_dtypes.float8_e5m2fnuz, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3,
    ml_dtypes.float8_e3m4, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu,
    ml_dtypes.bfloat16)]
BACK_LIMIT = 4096.0  # the converted-back value is clamped to this (f8e8m0fnu reaches 2^127)
# Above this bound an f32 sum of products of multiples of 2^-6 may round (24 bits).
DOT_LIMIT = 2.0**17


def _is_float(t: np.dtype) -> bool:
    return t in NARROW_FLOATS


def _largest(t: np.dtype) -> float:
    return float(ml_dtypes.finfo(t).max) if _is_float(t) else float(max(
        abs(int(ml_dtypes.iinfo(t).min)), int(ml_dtypes.iinfo(t).max)))


class NarrowOps:
    """g_narrow; see the module docstring."""

    src: Any
    b: xm.XlaBuilder
    rng: np.random.Generator
    trace: list

    def narrow_input(self, t: np.dtype, dims: tuple[int, ...]) -> xm.XlaOp:
        """A parameter or constant of type t: halves in [-6, 6] (rounded to t), or integers."""
        if _is_float(t):
            values = (self.rng.integers(-12, 13, dims) * 0.5).astype(np.float32).astype(t)
        else:
            info = ml_dtypes.iinfo(t)
            values = self.rng.integers(int(info.min), int(info.max) + 1, dims).astype(np.int8).astype(t)
        return self.array_input(values, f"{t}")

    def g_narrow(self) -> Any:
        x = self.pick(lambda v: v.dtype.kind in "iu" or (v.dtype.kind == "f" and v.exact))
        if x is None:
            x = self.new_input(np.dtype(np.float32), self.dims())
        b = self.b
        t = self.src.choice(NARROW_FLOATS + SUB_BYTE)
        op = b.convert_element_type(x.op, t)
        self.trace.append(f"convert {t} -> {op.shape}")
        # |value| bound in t (finite values), multiplies so far (granularity 2^-muls / 2).
        bound, muls, dotted = min(x.bound, _largest(t)), 0, False
        for _ in range(self.src.integer(1, 3)):
            op, t, bound, muls, dotted = self.narrow_step(op, t, bound, muls, dotted)
        back = self.src.choice([np.dtype(np.float32), np.dtype(np.float64)] if _is_float(t) else
                               [np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.float32)])
        op = b.convert_element_type(op, back)
        dims = list(op.shape.dimensions)
        if back.kind == "f":
            zero = b.broadcast(b.constant(np.zeros((), back)), dims)
            op = b.select(b.is_finite(op), op, zero)
            limit = b.constant(np.array(BACK_LIMIT, back))
            op = b.clamp(b.neg(limit), op, limit)
            return self.add(op, min(bound, BACK_LIMIT), True, f"narrow {t} back to {back}")
        return self.add(op, _largest(t), True, f"narrow {t} back to {back}")

    def narrow_step(self, op: xm.XlaOp, t: np.dtype, bound: float, muls: int,
                    dotted: bool) -> tuple[xm.XlaOp, np.dtype, float, int, bool]:
        b = self.b
        dims = tuple(op.shape.dimensions)
        floating = _is_float(t)
        kinds = ["add", "sub", "mul", "max", "min", "neg", "abs", "select", "transpose", "rev",
                 "reduce", "dot", "convert", "clamp"]
        if not floating:
            kinds += ["div", "rem", "and_", "or_", "xor", "shift_left", "shift_right_arithmetic",
                      "shift_right_logical", "population_count", "clz", "not_", "reduce"]
        kind = self.src.choice(kinds)
        if kind == "mul" and floating and muls >= 3:
            kind = "add"
        largest = _largest(t)
        if kind in ("add", "sub", "mul", "max", "min", "div", "rem", "and_", "or_", "xor",
                    "shift_left", "shift_right_arithmetic", "shift_right_logical"):
            y = op if self.src.chance(0.2) else self.narrow_input(t, dims)
            res = getattr(b, kind)(op, y) if self.src.chance(0.5) else getattr(b, kind)(y, op) \
                if kind in ("add", "mul", "max", "min", "and_", "or_", "xor") else getattr(b, kind)(op, y)
            grow = {"add": bound + 6, "sub": bound + 6, "mul": bound * max(bound, 6)}.get(kind, bound)
            self.trace.append(f"narrow {kind} -> {res.shape}")
            return res, t, min(grow, largest), muls + (kind == "mul"), dotted
        if kind == "abs" and not floating and ml_dtypes.iinfo(t).min == 0:
            kind = "neg"  # abs takes signed types only
        if kind in ("neg", "abs", "population_count", "clz", "not_"):
            res = getattr(b, kind)(op)
            self.trace.append(f"narrow {kind} -> {res.shape}")
            return res, t, bound, muls, dotted
        if kind == "select":
            y = self.narrow_input(t, dims)
            pred = b.compare(op, y, self.src.choice(["LT", "GE", "EQ", "NE"]))
            res = b.select(pred, y, op) if self.src.chance(0.5) else b.select(pred, op, y)
            self.trace.append(f"narrow compare+select -> {res.shape}")
            return res, t, max(bound, 6.0), muls, dotted
        if kind == "clamp":
            if floating:
                lo, hi = np.array(-1.5, np.float32), np.array(2.5, np.float32)
            else:
                lo, hi = np.array(-1 if ml_dtypes.iinfo(t).min < 0 else 0, np.int8), np.array(1, np.int8)
            res = b.clamp(b.constant(lo.astype(t)), op, b.constant(hi.astype(t)))
            self.trace.append(f"narrow clamp -> {res.shape}")
            return res, t, min(bound, 2.5), muls, dotted
        if kind == "transpose" and len(dims) >= 2:
            perm = self.perm(len(dims))
            self.trace.append(f"narrow transpose {perm}")
            return b.transpose(op, perm), t, bound, muls, dotted
        if kind == "rev" and dims:
            self.trace.append("narrow rev [0]")
            return b.rev(op, [0]), t, bound, muls, dotted
        if kind == "reduce" and dims:
            which = self.src.choice(["max", "min"] + ([] if floating else ["add"]))
            if floating:
                # ±inf, or in a type without infinities its extreme finite values (f8e8m0fnu:
                # the smallest is positive, still below every other value).
                info = ml_dtypes.finfo(t)
                has_inf = bool(np.isinf(np.array(math.inf, np.float32).astype(t)))
                low = -math.inf if has_inf else float(info.min)
                high = math.inf if has_inf else float(info.max)
                init = np.array(low if which == "max" else high, np.float32).astype(t)
            else:
                info = ml_dtypes.iinfo(t)
                init = np.array({"max": int(info.min), "min": int(info.max), "add": 0}[which],
                                np.int8).astype(t)
            dim = self.src.integer(0, len(dims) - 1)
            def reducer(p: xm.XlaOp, q: xm.XlaOp) -> xm.XlaOp:
                return getattr(p.builder, which)(p, q)

            res = b.reduce(op, b.constant(init), reducer, [dim])
            self.trace.append(f"narrow reduce {which} [{dim}] -> {res.shape}")
            return res, t, largest if which == "add" else bound, muls, dotted
        if kind == "dot" and dims and not dotted:
            k = dims[-1]
            if not floating or (bound * 6.0 * max(k, 1) <= DOT_LIMIT and muls <= 3
                                and t not in (NARROW_FLOATS[0], NARROW_FLOATS[3], NARROW_FLOATS[8])):
                n = self.src.integer(1, 3)
                y = self.narrow_input(t, (k, n))
                res = b.dot_general(op, y, xm.DotDimensionNumbers([len(dims) - 1], [0]))
                self.trace.append(f"narrow dot -> {res.shape}")
                return res, t, min(bound * 6.0 * max(k, 1), largest), muls + 1, True
        if kind == "convert":
            # To another narrow type: float <-> sub-byte int conversions too.
            to = self.src.choice(NARROW_FLOATS + SUB_BYTE)
            res = b.convert_element_type(op, to)
            self.trace.append(f"narrow convert {to} -> {res.shape}")
            if _is_float(to) and not floating:
                return res, to, min(bound, _largest(to)), 0, dotted
            return res, to, min(bound, _largest(to)), muls, dotted
        res = b.neg(op)
        self.trace.append(f"narrow neg -> {res.shape}")
        return res, t, bound, muls, dotted
