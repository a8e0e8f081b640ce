"""Neural-network workloads of issue #17: layer norm, attention, batched matmul, strided
(NCHW, NHWC) / dilated / 1x1 / depthwise convolutions, 2x2 and 3x3 max-pools and their
gradients (select_and_scatter) and a tanh RNN loop.

Each is a `Case` (bench/harness.py): ours built with the XlaBuilder API, numpy's usual way
(matmuls on its BLAS, convolutions as im2col + matmul), and the JAX function a user would
write. Matmul-like results are checked against a float64 reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from harness import Case, f32_params, measure, normal
from peers import jax, jnp
from timing import Measurement, Workload

import xlamlir as xm


def _f64(fn: Any) -> Any:
    return lambda *a: fn(*(x.astype(np.float64) for x in a))


def _sum_tolerance(terms: int) -> dict[str, float]:
    """Sums of `terms` products of unit normals: absolute error ~ sqrt(terms) * eps(f32)."""
    return {"rtol": 1e-4, "atol": 1e-3 * np.sqrt(terms / 64)}


def layer_norm(rows: int = 4096, cols: int = 1024, eps: float = 1e-5) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x, g, beta) = f32_params("layer_norm", (rows, cols), (cols,), (cols,))
        zero = b.constant(np.float32(0))

        def row_mean(v: Any) -> Any:
            total = b.reduce(v, zero, lambda a, e: a + e, [1])
            return b.broadcast_in_dim(total * (1.0 / cols), (rows, cols), [0])

        xc = x - row_mean(x)
        scale = b.rsqrt(row_mean(xc * xc) + eps)
        return b.build(xc * scale * b.broadcast_in_dim(g, (rows, cols), [1])
                       + b.broadcast_in_dim(beta, (rows, cols), [1]))

    def reference(x: Any, g: Any, beta: Any, np: Any = np) -> Any:
        mean = x.mean(axis=-1, keepdims=True)
        xc = x - mean
        var = (xc * xc).mean(axis=-1, keepdims=True)
        return xc / np.sqrt(var + np.float32(eps)) * g + beta

    return measure(Case(build, lambda: normal(0, (rows, cols), (cols,), (cols,)), reference,
                        jax and (lambda *a: reference(*a, np=jnp)), work=2 * 4 * rows * cols,
                        unit="GB/s", repeats=9, reference=_f64(reference), rtol=1e-4, atol=1e-4))


def attention(heads: int = 8, seq: int = 512, dim: int = 64) -> Measurement:
    """softmax(Q K^T / sqrt(d)) V per head."""
    scale = 1.0 / np.sqrt(dim)

    def build() -> xm.XlaComputation:
        shape = (heads, seq, dim)
        b, (q, k, v) = f32_params("attention", shape, shape, shape)
        s = b.dot_general(q, k, xm.DotDimensionNumbers((2,), (2,), (0,), (0,))) * float(scale)
        full = (heads, seq, seq)
        m = b.reduce(s, b.constant(np.float32(-np.inf)), lambda a, e: a.builder.max(a, e), [2])
        e = b.exp(s - b.broadcast_in_dim(m, full, [0, 1]))
        total = b.reduce(e, b.constant(np.float32(0)), lambda a, x: a + x, [2])
        p = e / b.broadcast_in_dim(total, full, [0, 1])
        return b.build(b.dot_general(p, v, xm.DotDimensionNumbers((2,), (1,), (0,), (0,))))

    def reference(q: Any, k: Any, v: Any, np: Any = np) -> Any:
        s = (q @ k.transpose(0, 2, 1)) * q.dtype.type(scale)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)) @ v

    def jax_fn(q: Any, k: Any, v: Any) -> Any:
        s = (q @ k.transpose(0, 2, 1)) * np.float32(scale)
        return jax.nn.softmax(s, axis=-1) @ v

    shape = (heads, seq, dim)
    return measure(Case(build, lambda: normal(1, shape, shape, shape), reference, jax and jax_fn,
                        work=4 * heads * seq * seq * dim, unit="GFLOP/s", repeats=9,
                        reference=_f64(reference), **_sum_tolerance(seq)))


def batched_matmul(batch: int = 32, n: int = 256) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x, y) = f32_params("batched_matmul", (batch, n, n), (batch, n, n))
        return b.build(b.dot_general(x, y, xm.DotDimensionNumbers((2,), (1,), (0,), (0,))))

    return measure(Case(build, lambda: normal(2, (batch, n, n), (batch, n, n)), np.matmul,
                        jnp and jnp.matmul, work=2 * batch * n ** 3, unit="GFLOP/s", repeats=9,
                        reference=_f64(np.matmul), **_sum_tolerance(n)))


def numpy_conv_nhwc(x: np.ndarray, k: np.ndarray, stride: int, pad: int, dilation: int = 1) -> np.ndarray:
    """im2col + one matmul: x[N,H,W,C], k[KH,KW,C,O] (taps `dilation` apart)."""
    kh, kw, c, o = k.shape
    if pad:
        x = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    extent = ((kh - 1) * dilation + 1, (kw - 1) * dilation + 1)
    windows = np.lib.stride_tricks.sliding_window_view(x, extent, axis=(1, 2))[
        :, ::stride, ::stride, :, ::dilation, ::dilation]
    n, oh, ow = windows.shape[:3]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * oh * ow, kh * kw * c)
    return (cols @ k.reshape(kh * kw * c, o)).reshape(n, oh, ow, o)


def _conv(name: str, x_shape: tuple[int, ...], k_shape: tuple[int, ...], stride: int, pad: int,
          layouts: tuple[str, str, str], numpy_fn: Any, groups: int = 1, repeats: int = 7,
          dilation: int = 1) -> Measurement:
    def build() -> xm.XlaComputation:
        b, (x, k) = f32_params(name, x_shape, k_shape)
        return b.build(b.conv_general_dilated(x, k, (stride, stride), [(pad, pad)] * 2,
                                              rhs_dilation=(dilation, dilation),
                                              dimension_numbers=layouts, feature_group_count=groups))

    def jax_fn(x: Any, k: Any) -> Any:
        return jax.lax.conv_general_dilated(x, k, (stride, stride), [(pad, pad)] * 2,
                                            rhs_dilation=(dilation, dilation),
                                            dimension_numbers=layouts, feature_group_count=groups)

    computation = build()
    outputs = int(np.prod(computation.program_shape()[1].dimensions))
    per_output = int(np.prod(k_shape)) // (k_shape[layouts[1].index("O")])
    return measure(Case(lambda: computation, lambda: normal(3, x_shape, k_shape), numpy_fn,
                        jax and jax_fn, work=2 * outputs * per_output, unit="GFLOP/s",
                        repeats=repeats, reference=_f64(numpy_fn), **_sum_tolerance(per_output)))


def strided_conv_nchw() -> Measurement:
    """3x3 stride 2, padding 1, XLA's default layouts (NCHW input, OIHW kernel)."""
    def numpy_fn(x: Any, k: Any) -> Any:
        out = numpy_conv_nhwc(x.transpose(0, 2, 3, 1), k.transpose(2, 3, 1, 0), 2, 1)
        return np.ascontiguousarray(out.transpose(0, 3, 1, 2))

    return _conv("conv_s2", (8, 64, 56, 56), (128, 64, 3, 3), 2, 1, ("NCHW", "OIHW", "NCHW"), numpy_fn)


def strided_conv_nhwc() -> Measurement:
    """3x3 stride 2, padding 1, channels last (JAX's usual layouts)."""
    return _conv("conv_s2_nhwc", (8, 56, 56, 64), (3, 3, 64, 128), 2, 1, ("NHWC", "HWIO", "NHWC"),
                 lambda x, k: numpy_conv_nhwc(x, k, 2, 1))


def dilated_conv() -> Measurement:
    """3x3 with kernel dilation 2 (atrous), padding 2, channels last."""
    return _conv("conv_dilated", (8, 28, 28, 64), (3, 3, 64, 64), 1, 2, ("NHWC", "HWIO", "NHWC"),
                 lambda x, k: numpy_conv_nhwc(x, k, 1, 2, dilation=2), dilation=2)


def pointwise_conv() -> Measurement:
    def numpy_fn(x: Any, k: Any) -> Any:
        return (x.reshape(-1, x.shape[-1]) @ k.reshape(k.shape[2], -1)).reshape(*x.shape[:3], -1)

    return _conv("conv_1x1", (8, 28, 28, 256), (1, 1, 256, 256), 1, 0, ("NHWC", "HWIO", "NHWC"),
                 numpy_fn)


def depthwise_conv(c: int = 128) -> Measurement:
    def numpy_fn(x: Any, k: Any) -> Any:
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
        h, w = x.shape[1:3]
        out = np.zeros_like(x)
        for i in range(3):
            for j in range(3):
                out += xp[:, i:i + h, j:j + w, :] * k[i, j, 0]
        return out

    return _conv("conv_depthwise", (8, 56, 56, c), (3, 3, 1, c), 1, 1, ("NHWC", "HWIO", "NHWC"),
                 numpy_fn, groups=c)


def max_pool(shape: tuple[int, int, int, int] = (8, 112, 112, 64), window: int = 2) -> Measurement:
    """window x window, stride 2, NHWC: 2x2 "VALID" (no padding), or 3x3 "SAME" (ResNet's
    stem pooling: padding (0, 1) on each spatial dimension, cells of -inf)."""
    n, h, w, c = shape
    pad = [(0, 0), (0, 1), (0, 1), (0, 0)] if window == 3 else [(0, 0)] * 4
    dims, strides = [1, window, window, 1], [1, 2, 2, 1]

    def build() -> xm.XlaComputation:
        b, (x,) = f32_params("max_pool", shape)
        return b.build(b.reduce_window(x, b.constant(np.float32(-np.inf)),
                                       lambda a, v: a.builder.max(a, v), dims, strides, padding=pad))

    def numpy_fn(x: Any) -> Any:
        if window == 2:
            return x.reshape(n, h // 2, 2, w // 2, 2, c).max(axis=(2, 4))
        padded = np.pad(x, pad, constant_values=-np.inf)
        out = padded[:, 0:h:2, 0:w:2]
        for i in range(3):
            for j in range(3):
                out = np.maximum(out, padded[:, i:i + h:2, j:j + w:2])
        return out

    def jax_fn(x: Any) -> Any:
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, dims, strides, pad)

    out_pixels = (h // 2) * (w // 2)
    return measure(Case(build, lambda: normal(4, shape), numpy_fn, jax and jax_fn,
                        work=4 * n * c * (h * w + out_pixels), unit="GB/s", repeats=9,
                        check=np.testing.assert_array_equal))


def numpy_max_pool_grad(x: np.ndarray, source: np.ndarray, window: int, stride: int,
                        pad: Sequence[tuple[int, int]]) -> np.ndarray:
    """select_and_scatter(x, GE, window x window / stride on the two middle dimensions of
    NHWC, padding `pad`, source, 0, add): in each window the first cell (in window order)
    holding its maximum receives the source value; padding cells are never picked."""
    n, h, w, c = x.shape
    oh, ow = source.shape[1:3]
    (top, _), (left, _) = pad[1], pad[2]
    padded = np.pad(x, pad)
    inside = np.zeros(padded.shape[1:3], bool)
    inside[top:top + h, left:left + w] = True
    cells = [(i, j) for i in range(window) for j in range(window)]

    def at(a: np.ndarray, i: int, j: int) -> np.ndarray:
        return a[..., i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride, :]

    best = np.zeros(source.shape, x.dtype)
    pick = np.full(source.shape, -1, np.int8)
    for k, (i, j) in enumerate(cells):
        value = at(padded, i, j)
        valid = at(inside[None, :, :, None], i, j)
        # XLA keeps the earlier cell unless select(earlier, later) = earlier >= later is false.
        take = valid & ((pick < 0) | ~(best >= value))
        best = np.where(take, value, best)
        pick = np.where(take, np.int8(k), pick)
    out = np.zeros(padded.shape, x.dtype)
    # Reversed window order: each cell's contributions arrive in the source's row-major
    # order (a later cell of a window is reached from an earlier window), as XLA adds them.
    for k in reversed(range(len(cells))):
        at(out, *cells[k])[...] += np.where(pick == k, source, np.float32(0))
    return out[:, top:top + h, left:left + w]


def max_pool_grad(shape: tuple[int, int, int, int] = (8, 112, 112, 64), window: int = 3) -> Measurement:
    """The max-pool's gradient: select_and_scatter (GE, add) of the pooled shape's source
    over the operand, 3x3/2 "SAME" (padding (0, 1), overlapping windows) or 2x2/2 "VALID"."""
    n, h, w, c = shape
    pad = [(0, 0), (0, 1), (0, 1), (0, 0)] if window == 3 else [(0, 0)] * 4
    dims, strides = [1, window, window, 1], [1, 2, 2, 1]
    pooled = (n, (h + sum(pad[1]) - window) // 2 + 1, (w + sum(pad[2]) - window) // 2 + 1, c)

    def build() -> xm.XlaComputation:
        b, (x, s) = f32_params("max_pool_grad", shape, pooled)
        return b.build(b.select_and_scatter(x, lambda a, e: a.builder.ge(a, e), dims, strides, pad, s,
                                            b.constant(np.float32(0)), lambda a, e: a + e))

    def jax_fn(x: Any, s: Any) -> Any:
        def pool(x: Any) -> Any:
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, dims, strides, pad)
        return jax.vjp(pool, x)[1](s)[0]  # XLA's select_and_scatter (GE, add)

    return measure(Case(build, lambda: normal(7, shape, pooled),
                        lambda x, s: numpy_max_pool_grad(x, s, window, 2, pad), jax and jax_fn,
                        work=4 * (2 * n * h * w * c + int(np.prod(pooled))), unit="GB/s", repeats=9,
                        check=np.testing.assert_array_equal))


def rnn(steps: int = 100, n: int = 256) -> Measurement:
    """h <- tanh(W h + U x_t) for `steps` inputs x_t: a while loop whose state carries the
    weights and inputs (sub-computations are closed), one dynamic_slice per step."""
    def build() -> xm.XlaComputation:
        b, (w, u, xs, h0) = f32_params("rnn", (n, n), (n, n), (steps, n), (n,))

        def cond(t: Any) -> Any:
            bb = t.builder
            return bb.lt(bb.get_tuple_element(t, 0), bb.constant(np.int32(steps)))

        def body(t: Any) -> Any:
            bb = t.builder
            i, w, u, xs, h = (bb.get_tuple_element(t, j) for j in range(5))
            x_t = bb.reshape(bb.dynamic_slice(xs, [i, bb.constant(np.int32(0))], [1, n]), (n,))
            h = bb.tanh(bb.dot(w, h) + bb.dot(u, x_t))
            return bb.tuple([i + np.int32(1), w, u, xs, h])

        loop = b.while_(cond, body, b.tuple([b.constant(np.int32(0)), w, u, xs, h0]))
        return b.build(b.get_tuple_element(loop, 4))

    def numpy_fn(w: Any, u: Any, xs: Any, h: Any) -> Any:
        for x_t in xs:
            h = np.tanh(w @ h + u @ x_t)
        return h

    def jax_fn(w: Any, u: Any, xs: Any, h: Any) -> Any:
        return jax.lax.scan(lambda h, x_t: (jnp.tanh(w @ h + u @ x_t), None), h, xs)[0]

    def args() -> tuple[Any, ...]:
        w, u, xs, h = normal(5, (n, n), (n, n), (steps, n), (n,))
        return w / np.float32(np.sqrt(n)), u / np.float32(np.sqrt(n)), xs, h  # stays out of saturation

    return measure(Case(build, args, numpy_fn, jax and jax_fn, work=4 * steps * n * n,
                        unit="GFLOP/s", repeats=21, reference=_f64(numpy_fn), rtol=1e-4, atol=1e-4))


def workloads() -> list[Workload]:
    """The issue-#17 rows of this module, for bench/suite.py."""
    return [
        Workload("layer norm f32[4096,1024]", layer_norm, None),
        Workload("attention [8,512,64] softmax(QK^T)V", attention, None),
        Workload("batched matmul f32[32,256,256]", batched_matmul, None),
        Workload("conv 3x3/2 NCHW [8,64,56,56]x[128,64,3,3]", strided_conv_nchw, None),
        Workload("conv 3x3/2 NHWC [8,56,56,64]x[3,3,64,128]", strided_conv_nhwc, None),
        Workload("conv 3x3 dilation 2 NHWC [8,28,28,64]x[3,3,64,64]", dilated_conv, None),
        Workload("conv 1x1 NHWC [8,28,28,256]x[1,1,256,256]", pointwise_conv, None),
        Workload("depthwise conv 3x3 NHWC [8,56,56,128]", depthwise_conv, None),
        Workload("max-pool 2x2/2 f32[8,112,112,64]", max_pool, None),
        Workload("max-pool 3x3/2 SAME f32[8,112,112,64]", lambda: max_pool(window=3), None),
        Workload("max-pool grad (select_and_scatter) 3x3/2 SAME f32[8,112,112,64]", max_pool_grad, None),
        Workload("max-pool grad (select_and_scatter) 2x2/2 f32[8,112,112,64]",
                 lambda: max_pool_grad(window=2), None),
        Workload("RNN tanh(Wh+Ux) 100 steps [256]", rnn, None),
    ]
