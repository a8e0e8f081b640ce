"""A numpy reference interpreter of built computations (the differential fuzzer's oracle).

`evaluate(computation, args)` walks the graph an XlaBuilder recorded (the xhlo
ops after the builder's sugar: broadcasts made explicit, `x[...]` as slices)
and computes each op with numpy, following ../shared/SEMANTICS.md: integer
division truncates with x/0 = -1 and INT_MIN/-1 = INT_MIN, remainder follows
the dividend with x rem 0 = x, shifts by the bit width or more saturate,
float -> int conversion saturates with NaN -> 0, dynamic-slice starts clamp.
It covers the ops the differential fuzzer generates (elementwise, compare,
select, clamp, convert, broadcast, reshape, transpose, slice, reverse,
concatenate, pad, iota, dot_general, reduce, dynamic slices, tuples, call);
anything else raises NotImplementedError. Values are computed in the op's own
dtype, so float rounding matches up to the transcendental functions' last
bits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import xlamlir as xm

_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "abs": np.abs,
    "negate": np.negative,
    "sign": np.sign,
    "floor": np.floor,
    "ceil": np.ceil,
    "round_nearest_even": np.rint,
    "round_nearest_afz": lambda x: np.copysign(np.floor(np.abs(x) + x.dtype.type(0.5)), x)
    if x.dtype.kind == "f" else x,
    "exponential": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: x.dtype.type(1) / np.sqrt(x),
    "tanh": np.tanh,
    "sine": np.sin,
    "cosine": np.cos,
    "atan": np.arctan,
    "logistic": lambda x: x.dtype.type(1) / (x.dtype.type(1) + np.exp(-x)),
    "is_finite": np.isfinite,
    "not": lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
    "popcnt": lambda x: _popcount(x),
    "count_leading_zeros": lambda x: _clz(x),
}

_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
            "GT": np.greater, "GE": np.greater_equal}


def _bits(x: np.ndarray) -> int:
    return x.dtype.itemsize * 8


def _unsigned(x: np.ndarray) -> np.ndarray:
    return x.view(np.dtype(f"u{x.dtype.itemsize}"))


def _popcount(x: np.ndarray) -> np.ndarray:
    u = _unsigned(x).astype(np.uint64)
    out = np.zeros(x.shape, np.uint64)
    for _ in range(_bits(x)):
        out += u & np.uint64(1)
        u >>= np.uint64(1)
    return out.astype(x.dtype)


def _clz(x: np.ndarray) -> np.ndarray:
    u = _unsigned(x).astype(np.uint64)
    n = _bits(x)
    out = np.full(x.shape, n, np.int64)
    for k in range(n):
        out = np.where((u >> np.uint64(k)) & np.uint64(1) == 1, n - 1 - k, out)
    return out.astype(x.dtype)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XLA's integer division: truncates; x/0 = -1 (all ones); INT_MIN/-1 = INT_MIN."""
    dt = a.dtype
    a64, b64 = a.astype(object), b.astype(object)
    out = np.empty(np.broadcast(a, b).shape, dt)
    for idx in np.ndindex(out.shape):
        x, y = int(a64[idx]), int(b64[idx])
        if y == 0:
            out[idx] = np.array(-1).astype(dt) if dt.kind == "i" else np.iinfo(dt).max
        else:
            q = abs(x) // abs(y) * (1 if (x >= 0) == (y >= 0) else -1)
            out[idx] = _wrap(q, dt)
    return out


def _int_rem(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sign of the dividend; x rem 0 = x; INT_MIN rem -1 = 0."""
    dt = a.dtype
    out = np.empty(np.broadcast(a, b).shape, dt)
    for idx in np.ndindex(out.shape):
        x, y = int(a[idx]), int(b[idx])
        out[idx] = x if y == 0 else _wrap(int(math.fmod(x, y)) if abs(x) < 2**52 else
                                          (abs(x) % abs(y)) * (1 if x >= 0 else -1), dt)
    return out


def _wrap(v: int, dt: np.dtype) -> Any:
    bits = dt.itemsize * 8
    v &= (1 << bits) - 1
    if dt.kind == "i" and v >= 1 << (bits - 1):
        v -= 1 << bits
    return dt.type(v)


def _shift(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = _bits(a)
    ua, ub = _unsigned(a).astype(np.uint64), _unsigned(b).astype(np.uint64)
    big = ub >= np.uint64(n)
    sb = np.where(big, np.uint64(0), ub)
    mask = np.uint64((1 << n) - 1)
    if kind == "shift_left":
        r = np.where(big, np.uint64(0), (ua << sb) & mask)
    elif kind == "shift_right_logical":
        r = np.where(big, np.uint64(0), ua >> sb)
    else:  # arithmetic: the top bit is replicated, whatever the type's signedness
        neg = (ua >> np.uint64(n - 1)) & np.uint64(1) == 1
        shifted = ua >> sb
        fill = (mask << (np.uint64(n) - sb)) & mask
        fill = np.where(sb == 0, np.uint64(0), fill)
        r = np.where(neg, shifted | fill, shifted)
        r = np.where(big, np.where(neg, mask, np.uint64(0)), r)
    return r.astype(np.dtype(f"u{a.dtype.itemsize}")).view(a.dtype)


def _binary(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dt = a.dtype
    if dt == np.bool_ and name in ("add", "maximum", "or"):
        return a | b
    if dt == np.bool_ and name in ("multiply", "minimum", "and"):
        return a & b
    if dt == np.bool_ and name == "xor":
        return a ^ b
    integral = dt.kind in "iu"
    if name == "add":
        return a + b
    if name == "subtract":
        return a - b
    if name == "multiply":
        return a * b
    if name == "divide":
        return _int_div(a, b) if integral else a / b
    if name == "remainder":
        return _int_rem(a, b) if integral else np.fmod(a, b)
    if name == "maximum":
        return np.maximum(a, b)
    if name == "minimum":
        return np.minimum(a, b)
    if name == "power" and not integral:
        return np.power(a, b)
    if name == "atan2":
        return np.arctan2(a, b)
    if name in ("and", "or", "xor"):
        return {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[name](a, b)
    if name.startswith("shift"):
        return _shift(name, a, b)
    raise NotImplementedError(f"binary {name} on {dt}")


def _convert(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    if dt == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and dt.kind in "iu":
        info = np.iinfo(dt)
        y = np.where(np.isnan(x), 0, x).astype(np.float64)
        y = np.trunc(np.clip(y, info.min, info.max))
        out = np.empty(x.shape, dt)
        for idx in np.ndindex(x.shape):  # exact for 64-bit bounds too
            v = y[idx]
            out[idx] = info.max if v >= info.max else info.min if v <= info.min else int(v)
        return out
    return x.astype(dt)


def _pad(x: np.ndarray, value: np.ndarray, low: Sequence[int], high: Sequence[int],
         interior: Sequence[int]) -> np.ndarray:
    """Interior padding first, then the edges: positive ones add `value`, negative ones cut."""
    if x.ndim == 0:
        return x.copy()
    dims = [n + max(n - 1, 0) * i for n, i in zip(x.shape, interior)]
    grown = np.full(dims, value, x.dtype)
    grown[tuple(slice(None, None, i + 1) for i in interior)] = x
    out = np.pad(grown, [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high)],
                 constant_values=value)
    return out[tuple(slice(max(-lo, 0), out.shape[k] - max(-hi, 0))
                     for k, (lo, hi) in enumerate(zip(low, high)))]


def _dot_general(lhs: np.ndarray, rhs: np.ndarray, attrs: dict[str, Any],
                 out_dtype: np.dtype) -> np.ndarray:
    lc, rc = attrs["lhs_contracting_dimensions"], attrs["rhs_contracting_dimensions"]
    lb, rb = attrs["lhs_batch_dimensions"], attrs["rhs_batch_dimensions"]
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    lsub = [""] * lhs.ndim
    rsub = [""] * rhs.ndim
    for i, j in zip(lb, rb):
        lsub[i] = rsub[j] = next(letters)
    for i, j in zip(lc, rc):
        lsub[i] = rsub[j] = next(letters)
    for i in range(lhs.ndim):
        lsub[i] = lsub[i] or next(letters)
    for j in range(rhs.ndim):
        rsub[j] = rsub[j] or next(letters)
    out = ([lsub[i] for i in lb] + [lsub[i] for i in range(lhs.ndim) if i not in lb and i not in lc]
           + [rsub[j] for j in range(rhs.ndim) if j not in rb and j not in rc])
    wide = np.float64 if out_dtype.kind == "f" else np.int64 if out_dtype.kind in "iu" else out_dtype
    if out_dtype == np.bool_:
        wide = np.int64
    result = np.einsum(f"{''.join(lsub)},{''.join(rsub)}->{''.join(out)}",
                       lhs.astype(wide), rhs.astype(wide))
    if out_dtype == np.bool_:
        return result != 0
    if out_dtype.kind in "iu":
        return np.vectorize(lambda v: _wrap(int(v), out_dtype), otypes=[out_dtype])(result) \
            if result.size else result.astype(out_dtype)
    return result.astype(out_dtype)


class Interpreter:
    """Evaluates one computation's graph; sub-computations get their own Interpreter."""

    def __init__(self, computation: xm.XlaComputation, vectorized: bool = False) -> None:
        # `vectorized`: a scalar sub-computation applied to whole arrays at once (reduce).
        self.vectorized = vectorized
        self.computation = computation
        self.builder = computation._builder
        self.root = computation._root

    def __call__(self, *args: Any) -> Any:
        values: dict[int, Any] = {}
        params = {n: op for n, op in self.builder.parameters.items()}
        for n, op in params.items():
            values[op.uid] = args[n]
        return self._value(self.root, values)

    def _value(self, op: xm.XlaOp, values: dict[int, Any]) -> Any:
        # Iterative post-order, so long chains do not hit the recursion limit.
        stack = [op]
        while stack:
            top = stack[-1]
            if top.uid in values:
                stack.pop()
                continue
            inputs = [top.source] if top.source is not None else [
                o for operand in top.operands
                for o in (operand if isinstance(operand, tuple) else (operand,))]
            missing = [o for o in inputs if o.uid not in values]
            if missing:
                stack.extend(missing)
                continue
            values[top.uid] = self._eval(top, values)
            stack.pop()
        return values[op.uid]

    def _eval(self, op: xm.XlaOp, values: dict[int, Any]) -> Any:
        if op.source is not None:
            return values[op.source.uid][op.index]
        name = op.opdef.name
        ins = [tuple(values[o.uid] for o in operand) if isinstance(operand, tuple)
               else values[operand.uid] for operand in op.operands]
        a = op.attrs
        dt = op.shape.dtype if op.shape.is_array() else None
        with np.errstate(all="ignore"):
            out = self._compute(name, op, ins, a)
        if dt is not None:
            out = np.asarray(out)
            if out.dtype != dt:
                out = out.astype(dt)
            assert self.vectorized or out.shape == op.shape.dimensions, (name, out.shape, op.shape)
        return out

    def _compute(self, name: str, op: xm.XlaOp, ins: list[Any], a: dict[str, Any]) -> Any:
        family = op.opdef.family
        if name == "constant":
            return np.asarray(a["value"])
        if family == "unary":
            if name not in _UNARY:
                raise NotImplementedError(name)
            return _UNARY[name](ins[0])
        if family == "binary":
            return _binary(name, ins[0], ins[1])
        if name == "compare":
            if a["compare_type"] == "TOTALORDER":
                raise NotImplementedError("compare TOTALORDER")
            return _COMPARE[a["comparison_direction"]](ins[0], ins[1])
        if name == "select":
            return np.where(ins[0], ins[1], ins[2])
        if name == "clamp":
            return np.minimum(np.maximum(ins[1], ins[0]), ins[2])
        if name == "convert":
            return _convert(ins[0], xm.dtype_of(a["new_element_type"]))
        if name == "broadcast_in_dim":
            x = ins[0]
            shape = [1] * len(a["out_dim_size"])
            for i, d in enumerate(a["broadcast_dimensions"]):
                shape[d] = x.shape[i]
            return np.broadcast_to(x.reshape(shape), a["out_dim_size"]).copy()
        if name == "reshape":
            return ins[0].reshape(a["new_sizes"])
        if name == "transpose":
            return np.transpose(ins[0], a["permutation"])
        if name == "reverse":
            return np.flip(ins[0], a["dimensions"]) if a["dimensions"] else ins[0]
        if name == "slice":
            return ins[0][tuple(slice(s, l, st) for s, l, st in
                                zip(a["start_indices"], a["limit_indices"], a["strides"]))]
        if name == "concatenate":
            return np.concatenate(ins[0], a["dimension"])
        if name == "pad":
            return _pad(ins[0], ins[1], a["edge_padding_low"], a["edge_padding_high"],
                        a["interior_padding"])
        if name == "iota":
            dims = a["dimensions"]
            k = a["iota_dimension"]
            shape = [1] * len(dims)
            shape[k] = dims[k]
            return np.broadcast_to(np.arange(dims[k]).reshape(shape), dims).astype(op.shape.dtype)
        if name == "dot_general":
            return _dot_general(ins[0], ins[1], a, op.shape.dtype)
        if name == "reduce":
            return self._reduce(op, ins, a)
        if name == "dynamic_slice":
            x, starts = ins[0], [int(s) for s in ins[1]]
            sizes = a["slice_sizes"]
            starts = [min(max(s, 0), d - n) for s, d, n in zip(starts, x.shape, sizes)]
            return x[tuple(slice(s, s + n) for s, n in zip(starts, sizes))]
        if name == "dynamic_update_slice":
            x, u, starts = ins[0].copy(), ins[1], [int(s) for s in ins[2]]
            starts = [min(max(s, 0), d - n) for s, d, n in zip(starts, x.shape, u.shape)]
            x[tuple(slice(s, s + n) for s, n in zip(starts, u.shape))] = u
            return x
        if name == "tuple":
            return tuple(ins[0])
        if name == "get_tuple_element":
            return ins[0][a["index"]]
        if name == "call":
            return Interpreter(a["to_apply"])(*ins[0])
        if name == "optimization_barrier":
            return ins[0]
        raise NotImplementedError(name)

    def _reduce(self, op: xm.XlaOp, ins: list[Any], a: dict[str, Any]) -> Any:
        inputs, inits = ins[0], ins[1]
        dims = sorted(a["dimensions"])
        comp = Interpreter(a["computation"], vectorized=True)
        n = len(inputs)
        keep = [d for d in range(inputs[0].ndim) if d not in dims]
        count = math.prod(inputs[0].shape[d] for d in dims)
        moved = [np.transpose(x, dims + keep).reshape((count, *[x.shape[d] for d in keep]))
                 for x in inputs]
        accs = [np.broadcast_to(init, moved[0].shape[1:]).astype(init.dtype) for init in inits]
        for k in range(moved[0].shape[0]):
            result = comp(*accs, *[m[k] for m in moved])
            accs = list(result) if n > 1 else [result]
            accs = [np.asarray(r).astype(i.dtype) for r, i in zip(accs, inits)]
        return tuple(accs) if op.shape.is_tuple() else accs[0]


def evaluate(computation: xm.XlaComputation, args: Sequence[Any]) -> Any:
    """The computation's result on `args` (numpy values of its parameter shapes)."""
    return Interpreter(computation)(*[np.asarray(x) for x in args])
