"""A survey of op families outside `make bench` against numpy: the quickest way to find a
slow op nobody measured (issue #17: this list found f64 matmuls 24x slower than numpy,
strided copies 6x, libm called per element for log/sin/pow and f64 math).

Each case compiles one small program (~1M elements or a mid-size matrix), checks it
against numpy, then prints ours and numpy's median time and the ratio; a ratio above
1.3 is marked `<<<`. Results are checked before timing; a mismatch is printed, not timed.

    python bench/op_survey.py [--quick] [--only SUBSTRING ...]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

os.environ.setdefault("XLAMLIR_CACHE_DIR", "off")  # cold compiles, no entries written

import numpy as np
from timing import median_time

import xlamlir as xm

TYPES = {np.float32: xm.F32, np.float64: xm.F64, np.float16: xm.F16, np.int32: xm.S32,
         np.int64: xm.S64, np.uint8: xm.U8, np.int8: xm.S8}
f32, f64, f16, i32, i64, u8, i8 = np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8, np.int8
M = (1024, 1024)
N = 1 << 20
MARK = 1.3


@dataclass
class Case:
    name: str
    params: list[tuple[tuple[int, ...], type]]
    build: Callable[..., Any]  # (builder, *parameters) -> the root op
    numpy_fn: Callable[..., Any]
    tolerance: float = 1e-3


def _zero(b: xm.XlaBuilder, dtype: type) -> xm.XlaOp:
    return b.constant(np.zeros((), dtype))


def _sum(b: xm.XlaBuilder, x: xm.XlaOp, dtype: type, dims: list[int]) -> xm.XlaOp:
    return b.reduce(x, _zero(b, dtype), lambda a, v: a + v, dims)


CASES = [
    Case("f32 log 1M", [((N,), f32)], lambda b, x: b.log(b.abs(x)), lambda x: np.log(np.abs(x))),
    Case("f32 log1p 1M", [((N,), f32)], lambda b, x: b.log1p(b.abs(x)), lambda x: np.log1p(np.abs(x))),
    Case("f32 sin 1M", [((N,), f32)], lambda b, x: b.sin(x), np.sin),
    Case("f32 cos 1M", [((N,), f32)], lambda b, x: b.cos(x), np.cos),
    Case("f32 pow 256K", [((N // 4,), f32)] * 2, lambda b, x, y: b.pow(b.abs(x), y),
         lambda x, y: np.power(np.abs(x), y), 1e-2),
    Case("f32 logistic 1M", [((N,), f32)], lambda b, x: b.logistic(x), lambda x: 1 / (1 + np.exp(-x))),
    Case("f64 exp 1M", [((N,), f64)], lambda b, x: b.exp(x), np.exp),
    Case("f64 log 256K", [((N // 4,), f64)], lambda b, x: b.log(b.abs(x)), lambda x: np.log(np.abs(x))),
    Case("f64 tanh 256K", [((N // 4,), f64)], lambda b, x: b.tanh(x), np.tanh),
    Case("f64 sin 256K", [((N // 4,), f64)], lambda b, x: b.sin(x), np.sin),
    Case("f32->f16 convert 1M", [((N,), f32)], lambda b, x: b.convert_element_type(x, xm.F16),
         lambda x: x.astype(np.float16)),
    Case("f16 add 1M", [((N,), f16)] * 2, lambda b, x, y: x + y, np.add),
    Case("i32 div 1M", [((N,), i32)] * 2,
         lambda b, x, y: b.div(x, b.max(b.abs(y), b.constant(np.int32(1)))),
         lambda x, y: np.trunc(x / np.maximum(np.abs(y), 1)).astype(np.int32)),
    Case("u8 add 4M", [((4 * N,), u8)] * 2, lambda b, x, y: x + y, np.add),
    Case("i32 sum rows [1024,1024]", [(M, i32)], lambda b, x: _sum(b, x, i32, [1]),
         lambda x: x.sum(1, dtype=np.int32)),
    Case("f32 sum cols [1024,1024]", [(M, f32)], lambda b, x: _sum(b, x, f32, [0]), lambda x: x.sum(0)),
    Case("f64 sum rows [1024,1024]", [(M, f64)], lambda b, x: _sum(b, x, f64, [1]), lambda x: x.sum(1)),
    Case("f64 transpose [1024,1024]", [(M, f64)], lambda b, x: b.transpose(x, (1, 0)),
         lambda x: np.ascontiguousarray(x.T)),
    Case("f32 slice [2048,2048][100:1900,3:2000]", [((2048, 2048), f32)],
         lambda b, x: b.slice(x, (100, 3), (1900, 2000), (1, 1)),
         lambda x: np.ascontiguousarray(x[100:1900, 3:2000])),
    Case("f32 pad [1024,1024] by 1", [(M, f32)], lambda b, x: b.pad(x, _zero(b, f32), [(1, 1, 0)] * 2),
         lambda x: np.pad(x, 1)),
    Case("f32 concat 4x[256,1024] axis 0", [((256, 1024), f32)] * 4,
         lambda b, *xs: b.concat_in_dim(list(xs), 0), lambda *xs: np.concatenate(xs, 0)),
    Case("f32 reverse [1024,1024] axis 1", [(M, f32)], lambda b, x: b.rev(x, [1]),
         lambda x: np.ascontiguousarray(x[:, ::-1])),
    Case("f64 dot [512,512]^2", [((512, 512), f64)] * 2, lambda b, x, y: b.dot(x, y), np.matmul),
    Case("i32 dot [256,256]^2", [((256, 256), i32)] * 2, lambda b, x, y: b.dot(x, y), np.matmul),
    Case("f32 dot [4096,64]x[64,64]", [((4096, 64), f32), ((64, 64), f32)],
         lambda b, x, y: b.dot(x, y), np.matmul),
    Case("f32 matvec [1024,1024]x[1024]", [(M, f32), ((1024,), f32)], lambda b, x, y: b.dot(x, y),
         np.matmul, 1e-2),
    Case("f32 matvec [2048,2048]x[2048]", [((2048, 2048), f32), ((2048,), f32)],
         lambda b, x, y: b.dot(x, y), np.matmul, 1e-2),
    Case("f32 vecmat [1,1024]x[1024,1024]", [((1, 1024), f32), (M, f32)], lambda b, x, y: b.dot(x, y),
         np.matmul, 1e-2),
    Case("s32 sort 1M in [-100, 100]", [((N,), i32)], lambda b, x: b.sort(x), np.sort),
    Case("f64 sort 1M", [((N,), f64)], lambda b, x: b.sort(x), np.sort),
    Case("f32 cumsum rows [1024,1024]", [(M, f32)],
         lambda b, x: b.reduce_window(x, _zero(b, f32), lambda a, v: a + v, (1, 1024), (1, 1),
                                      padding=[(0, 0), (1023, 0)]),
         lambda x: np.cumsum(x, 1, dtype=np.float32), 1e-2),
]


def _data(shape: tuple[int, ...], dtype: type, rng: np.random.Generator) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    low = -100 if np.dtype(dtype).kind == "i" else 0
    return rng.integers(low, 100, shape).astype(dtype)


def run(case: Case, repeats: int) -> str:
    rng = np.random.default_rng(0)
    args = [_data(shape, dtype, rng) for shape, dtype in case.params]
    b = xm.XlaBuilder("survey")
    params = [b.parameter(i, xm.Shape.array(TYPES[dtype], shape))
              for i, (shape, dtype) in enumerate(case.params)]
    case.build(b, *params)
    exe = xm.compile(b.build())
    got, want = exe(*args), case.numpy_fn(*args)
    if not np.allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                       rtol=case.tolerance, atol=case.tolerance):
        return f"{case.name:40s} MISMATCH against numpy"
    ours = min(median_time(lambda: exe(*args), repeats) for _ in range(3))
    theirs = min(median_time(lambda: case.numpy_fn(*args), repeats) for _ in range(3))
    ratio = ours / theirs
    return (f"{case.name:40s} ours {ours * 1e6:9.1f} us  numpy {theirs * 1e6:9.1f} us  "
            f"ratio {ratio:5.2f}{'  <<<' if ratio > MARK else ''}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per timing block")
    parser.add_argument("--only", action="append", default=[], help="cases whose name contains this")
    args = parser.parse_args(argv)
    for case in CASES:
        if args.only and not any(o in case.name for o in args.only):
            continue
        print(run(case, 5 if args.quick else 30), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
