"""Traps in generated code: integer division never raises SIGFPE, and out-of-range indices
never read or write out of bounds.

Integer x/0, x rem 0, INT_MIN/-1 and INT_MIN rem -1 follow XLA's defined results for
every integer type, in scalar code, in vectorized loops and with constant operands.
Dynamic slices clamp their starts, gathers clamp theirs, scatters skip out-of-bounds
windows. Inputs are placed against PROT_NONE guard pages (right before one and right
after one, via mmap + mprotect), so an out-of-bounds read faults instead of reading
neighbouring memory. These tests run in a child interpreter (@isolated): a trap fails
the test with the signal's name instead of killing pytest.
"""

from __future__ import annotations

import ctypes
import mmap

import numpy as np
from conftest import isolated

import xlamlir as xm

S = xm.Shape.parse
INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PROT_NONE = 0
_keep: list[mmap.mmap] = []  # guarded mappings stay mapped for the process's life


def guarded(a: np.ndarray, at_end: bool = True) -> np.ndarray:
    """A copy of `a` in its own mapping, ending right before a PROT_NONE page (`at_end`) or
    starting right after one, so reading one element past it (or before it) faults."""
    page = mmap.PAGESIZE
    n = a.nbytes
    pages = -(-n // page) + 2
    m = mmap.mmap(-1, pages * page)
    _keep.append(m)
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    for at in (base, base + (pages - 1) * page):
        if _libc.mprotect(ctypes.c_void_p(at), page, PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect failed")
    start = (pages - 1) * page - n if at_end else page
    out = np.frombuffer(m, a.dtype, count=a.size, offset=start).reshape(a.shape)
    out[...] = a
    return out


def test_guard_pages_fault(tmp_path) -> None:
    """The guard works: reading past a guarded array kills a child with SIGSEGV."""
    import subprocess
    import sys

    code = ("import numpy as np, sys; sys.path.insert(0, 'tests'); from test_traps import guarded; "
            "a = guarded(np.arange(4, dtype=np.int32)); "
            "b = np.lib.stride_tricks.as_strided(a, (5,), (4,)); print(int(b[4]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60,
                          cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert proc.returncode < 0, proc.stdout + proc.stderr


# ---- integer division ----------------------------------------------------------------------------


def _div_rem_expected(a: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dt = a.dtype
    q = np.empty_like(a)
    r = np.empty_like(a)
    for k, (x, y) in enumerate(zip(a.tolist(), d.tolist())):
        if y == 0:
            q[k] = np.array(-1).astype(dt) if dt.kind == "i" else np.iinfo(dt).max
            r[k] = x
        elif dt.kind == "i" and x == np.iinfo(dt).min and y == -1:
            q[k], r[k] = x, 0
        else:
            sign = 1 if (x >= 0) == (y >= 0) else -1
            q[k] = sign * (abs(x) // abs(y))
            r[k] = x - int(q[k]) * y
    return q, r


@isolated
def test_integer_division_never_traps() -> None:
    """Every integer type in a vectorized loop (1000 elements: vector body and scalar tail),
    a few in short arrays, and constants and rank-0 values."""
    for dtype in INT_TYPES:
        _check_div_rem(dtype, 1000)
    for dtype in (np.int8, np.int64, np.uint32):
        _check_div_rem(dtype, 3)
    _check_constants_and_scalars()


def _check_div_rem(dtype: type, n: int) -> None:
    """x / d and x rem d against XLA's defined results; the operands sit against guard pages."""
    info = np.iinfo(dtype)
    a_vals = [info.min, info.min, info.max, 7, -7 if info.min < 0 else 7, 0, 1, info.min]
    d_vals = [-1 if info.min < 0 else 1, 0, 0, 0, 2, 0, -1 if info.min < 0 else 3, 1]
    a = np.resize(np.array(a_vals, dtype), n)
    d = np.resize(np.array(d_vals, dtype), n)
    shape = xm.Shape.array(dtype, (n,))
    b = xm.XlaBuilder(f"divrem_{np.dtype(dtype).name}_{n}")
    x, y = b.parameter(0, shape), b.parameter(1, shape)
    b.tuple([b.div(x, y), b.rem(x, y)])
    q, r = xm.compile(b.build())(guarded(a), guarded(d, at_end=False))
    eq, er = _div_rem_expected(a, d)
    np.testing.assert_array_equal(q, eq, err_msg=f"{np.dtype(dtype).name} div")
    np.testing.assert_array_equal(r, er, err_msg=f"{np.dtype(dtype).name} rem")


def _check_constants_and_scalars() -> None:
    """Constant operands (folding must not trap at compile time either) and rank-0 values."""
    for dtype in (np.int32, np.uint8):
        info = np.iinfo(dtype)
        lo = info.min if info.min < 0 else info.max
        m1 = -1 if info.min < 0 else 1
        b = xm.XlaBuilder(f"cdiv_{np.dtype(dtype).name}")
        p = b.parameter(0, xm.Shape.array(dtype, ()))
        c = b.constant
        b.tuple([b.div(c(np.array(lo, dtype)), c(np.array(m1, dtype))),
                 b.rem(c(np.array(lo, dtype)), c(np.array(m1, dtype))),
                 b.div(c(np.array(5, dtype)), c(np.zeros((), dtype))),
                 b.rem(c(np.array(5, dtype)), c(np.zeros((), dtype))),
                 b.div(p, c(np.zeros((), dtype))), b.div(c(np.array(lo, dtype)), p)])
        out = xm.compile(b.build())(np.array(m1, dtype))
        neg1 = np.array(-1).astype(dtype) if info.min < 0 else info.max
        expect = [lo if info.min < 0 else lo // 1, 0, neg1, 5, neg1,
                  lo if info.min < 0 else lo // 1]
        assert [int(v) for v in out] == [int(e) for e in expect], (dtype, out)


# ---- indices out of range --------------------------------------------------------------------------


@isolated
def test_out_of_range_indices_never_read_or_write_out_of_bounds() -> None:
    _check_dynamic_slices()
    _check_gather()
    _check_scatter()


def _check_dynamic_slices() -> None:
    """Starts clamp so the slice fits, for any start type and value."""
    x = np.arange(40, dtype=np.float32).reshape(8, 5)
    for start_type in (np.int64, np.uint32, np.int8):
        info = np.iinfo(start_type)
        b = xm.XlaBuilder(f"ds_{np.dtype(start_type).name}")
        op = b.parameter(0, S("f32[8,5]"))
        i = b.parameter(1, xm.Shape.array(start_type, ()))
        j = b.parameter(2, xm.Shape.array(start_type, ()))
        upd = b.parameter(3, S("f32[3,2]"))
        b.tuple([b.dynamic_slice(op, [i, j], [3, 2]), b.dynamic_update_slice(op, upd, [i, j])])
        exe = xm.compile(b.build())
        u = -np.ones((3, 2), np.float32)
        for si, sj in [(0, 0), (info.max, info.max), (info.min, info.max), (7, 4), (6, 3),
                       (info.min, info.min), (-1 if info.min < 0 else 2, 100 % (info.max + 1))]:
            for at_end in (True, False):
                sl, up = exe(guarded(x, at_end), np.array(si, start_type), np.array(sj, start_type),
                             guarded(u, not at_end))
                ci, cj = min(max(int(si), 0), 5), min(max(int(sj), 0), 3)
                np.testing.assert_array_equal(sl, x[ci:ci + 3, cj:cj + 2])
                want = x.copy()
                want[ci:ci + 3, cj:cj + 2] = u
                np.testing.assert_array_equal(up, want)


def _check_gather() -> None:
    table = np.arange(8 * 6, dtype=np.int64).reshape(8, 6)
    dn = xm.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1),
                                   index_vector_dim=1)
    for index_type in (np.int32, np.uint32):
        b = xm.XlaBuilder(f"gather_{np.dtype(index_type).name}")
        op = b.parameter(0, S("s64[8,6]"))
        idx = b.parameter(1, xm.Shape.array(index_type, (6, 2)))
        b.gather(op, idx, dn, (3, 2))
        exe = xm.compile(b.build())
        info = np.iinfo(index_type)
        starts = np.array([[0, 0], [7, 5], [info.max, info.max], [info.min, 3], [5, info.min],
                           [6, 4]], dtype=np.int64).astype(index_type)
        for at_end in (True, False):
            got = exe(guarded(table, at_end), guarded(starts, not at_end))
            for k, (si, sj) in enumerate(starts.tolist()):
                ci, cj = min(max(si, 0), 5), min(max(sj, 0), 4)
                np.testing.assert_array_equal(got[k], table[ci:ci + 3, cj:cj + 2], err_msg=str(k))


def _check_scatter() -> None:
    """Out-of-bounds windows (even partly) are skipped whole, as XLA's ScatterExpander does."""
    operand = np.zeros((8, 4), np.float32)
    dn = xm.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=(0, 1), index_vector_dim=1)
    b = xm.XlaBuilder("scatter_oob")
    op = b.parameter(0, S("f32[8,4]"))
    idx = b.parameter(1, S("s32[7,2]"))
    upd = b.parameter(2, S("f32[7,2,2]"))
    b.scatter(op, idx, upd, lambda cur, new: cur + new, dn)
    exe = xm.compile(b.build())
    imax, imin = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    starts = np.array([[0, 0], [6, 2], [7, 0], [-1, 0], [imax, 0], [imin, imin], [3, 3]], np.int32)
    updates = np.arange(1, 7 * 4 + 1, dtype=np.float32).reshape(7, 2, 2)
    want = operand.copy()
    for (si, sj), u in zip(starts.tolist(), updates):
        if 0 <= si <= 6 and 0 <= sj <= 2:  # the whole 2x2 window fits, else it is skipped
            want[si:si + 2, sj:sj + 2] += u
    for at_end in (True, False):
        got = exe(guarded(operand, at_end), guarded(starts, not at_end), guarded(updates, at_end))
        np.testing.assert_array_equal(got, want)
