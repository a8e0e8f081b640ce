"""The custom-call registry and the trampolines the JIT-compiled code calls.

`register_custom_call(name, fn)` takes a Python function over numpy arrays or a
ctypes function pointer with XLA's original CPU ABI `void f(void *out, const
void **in)`. Each call site of a compiled module is bound to a trampoline that
views the memref descriptors as numpy arrays. A Python exception cannot cross
the native frames, so it is recorded and raised once the call returns.
Imports `dialect`.
"""

from __future__ import annotations

import ctypes
import difflib
import threading
import warnings
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..dialect.errors import ArgumentError, XlaError, user_location
from ..dialect.shape import Shape

_TARGETS: dict[str, Any] = {}
_LOCK = threading.Lock()


class CustomCallError(XlaError, RuntimeError):
    """A registered custom-call target raised or returned a wrong value."""


def register_custom_call(name: str, fn: Any) -> None:
    """Register `fn` as the target `name` (replacing an earlier registration)."""
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"a custom-call target name must be a non-empty str, got {name!r}")
    if not (callable(fn) or isinstance(fn, int)):
        raise ArgumentError(f"custom-call target {name!r} must be callable or a function address")
    with _LOCK:
        _TARGETS[name] = fn


def _lookup(name: str, location: str = "") -> Any:
    with _LOCK:
        target = _TARGETS.get(name)
    if target is None:
        where = f" (the custom_call at {location})" if location else ""
        raise CustomCallError(f"no custom-call target {name!r} is registered "
                              f"(xm.register_custom_call){where}{_did_you_mean(name)}")
    return target


def _did_you_mean(name: str, builtins: Iterable[str] = ()) -> str:
    """"; did you mean 'x'?" for a registered target spelled like `name`, else ""."""
    with _LOCK:
        known = [*_TARGETS, *builtins]
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def _view(descriptor: int, shape: Shape) -> np.ndarray:
    """A numpy view of the memref behind a descriptor pointer."""
    rank = shape.rank
    words = (ctypes.c_int64 * (3 + 2 * rank)).from_address(descriptor)
    dtype = shape.dtype
    aligned, offset = words[1], words[2]
    sizes = tuple(words[3 + i] for i in range(rank))
    strides = tuple(words[3 + rank + i] * dtype.itemsize for i in range(rank))
    count = int(np.prod(sizes)) if sizes else 1
    if count == 0:
        return np.zeros(sizes, dtype)
    span = sum((n - 1) * abs(s) for n, s in zip(sizes, strides, strict=True)) + dtype.itemsize
    raw = (ctypes.c_char * span).from_address(aligned + offset * dtype.itemsize)
    return np.ndarray(sizes, dtype, buffer=raw, strides=strides)


class Trampoline:
    """Binds one call site (`record` from the lowering) to its registered target."""

    def __init__(self, record: dict[str, str], errors: threading.local,
                 builtins: dict[str, Callable[..., None]] | None = None) -> None:
        self.target = record["target"]
        self.opaque = record["opaque"]
        self.location = record.get("location", "")
        self.inputs = [Shape.parse(s) for s in record["inputs"].split(";") if s]
        self.results = [Shape.parse(s) for s in record["results"].split(";") if s]
        self.errors = errors
        self.builtin = (builtins or {}).get(self.target)
        count = len(self.inputs) + len(self.results)
        self.cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * count))(self._call)

    def _call(self, *descriptors: int) -> None:
        try:
            ins = [_view(d, s) for d, s in zip(descriptors, self.inputs, strict=False)]
            outs = [_view(d, s) for d, s in zip(descriptors[len(self.inputs):], self.results,
                                                 strict=True)]
            if self.builtin is not None:
                self.builtin(ins, outs, self.opaque)
                return
            target = _lookup(self.target, self.location)
            if isinstance(target, (int, ctypes._CFuncPtr)):  # noqa: SLF001 - ctypes' own type
                self._call_c(target, ins, outs)
            else:
                self._call_python(target, ins, outs)
        except BaseException as e:  # noqa: BLE001 - must not unwind through native frames
            # Raised by the calling thread's Executable once the native call returns.
            self.errors.__dict__.setdefault("pending", []).append(e)

    def _call_python(self, target: Callable[..., Any], ins: list[np.ndarray],
                     outs: list[np.ndarray]) -> None:
        for array in ins:
            array.flags.writeable = False
        value = target(*ins, opaque=self.opaque) if self.opaque else target(*ins)
        values = list(value) if isinstance(value, (tuple, list)) else [value]
        if len(values) != len(outs):
            raise CustomCallError(f"custom call {self.target!r} returned {len(values)} value(s), "
                                  f"expected {len(outs)}")
        for out, got, shape in zip(outs, values, self.results, strict=True):
            got = np.asarray(got)
            if got.shape != out.shape:
                raise CustomCallError(f"custom call {self.target!r} returned shape {got.shape}, "
                                      f"expected {shape}")
            out[...] = got.astype(out.dtype, copy=False)

    def _call_c(self, target: Any, ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        # XLA's original CPU ABI reads dense row-major buffers.
        dense_ins = [np.ascontiguousarray(a) for a in ins]
        in_ptrs = (ctypes.c_void_p * max(len(dense_ins), 1))(
            *[a.ctypes.data for a in dense_ins])
        dense_outs = [np.empty(o.shape, o.dtype) for o in outs]
        if len(dense_outs) == 1:
            out_arg = dense_outs[0].ctypes.data
        else:
            out_table = (ctypes.c_void_p * len(dense_outs))(*[a.ctypes.data for a in dense_outs])
            out_arg = ctypes.addressof(out_table)
        address = target if isinstance(target, int) else ctypes.cast(target, ctypes.c_void_p).value
        ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(address)(out_arg, in_ptrs)
        for out, dense in zip(outs, dense_outs, strict=True):
            out[...] = dense


def bind_custom_calls(engine: Any, records: list[dict[str, str]], errors: threading.local,
                      builtins: dict[str, Callable[..., None]] | None = None) -> list[Trampoline]:
    """Register a trampoline for every call site (before the first lookup)."""
    trampolines = []
    for record in records:
        trampoline = Trampoline(record, errors, builtins)
        if trampoline.builtin is None and record["target"] not in _TARGETS:
            # Targets may be registered after compiling (the call raises if still missing);
            # a likely misspelling is worth saying now, at the user's xm.compile line.
            hint = _did_you_mean(record["target"], builtins or ())
            if hint:
                filename, line = user_location() or ("<unknown>", 0)
                warnings.warn_explicit(
                    f"custom-call target {record['target']!r} is not registered{hint}",
                    UserWarning, filename, line)
        engine.register_runtime(record["symbol"], trampoline.cfunc)
        trampolines.append(trampoline)
    return trampolines
