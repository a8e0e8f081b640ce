"""Executable: a JIT-compiled computation called on numpy arrays.

The entry point `_mlir_ciface_main(memref descriptors...)` is called through
ctypes, which releases the GIL for the duration of the native call. The call
path only checks arguments, fills one int64 buffer of descriptors and
allocates the results. From its second call on, an executable whose parameters
and results are plain arrays first tries the C path (runtime/fastcall.py), which
does the same for arguments that need no conversion and leaves every other call
to ctypes. Imports `dialect` and `runtime.arguments`.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ArgumentError, CompileError, XlaError
from ..dialect.hlo_text import hlo_text
from ..dialect.ops_dynamic import dynamic_result_of, slice_to_sizes
from ..dialect.shape import Shape
from ..lowering.ops.rng import rng_state, set_rng_seed, set_rng_state
from . import fastcall
from .arguments import LeafSpec, coerce, strides_fit
from .custom_calls import CustomCallError
from .export import export_executable
from .inspection import dump_stages, executable_html, stage_diff
from .replicas import execute_replicated


class Executable:
    """Call it with one argument per parameter; a tuple parameter takes a Python tuple."""

    def __init__(self, *, name: str, engine: Any, parameter_shapes: list[Shape],
                 result_shape: Shape, result_leaves: list[Shape], stages: dict[str, str],
                 num_replicas: int = 1, dynamic_strides: bool = False,
                 strided_variant: Callable[[], Executable] | None = None,
                 callbacks: tuple[Any, threading.local] | None = None,
                 feeds: tuple[Any, Any] | None = None, compile_stats: dict[str, Any] | None = None,
                 pass_stages: list[tuple[str, str, str]] | None = None,
                 dispatches_parallel_loops: bool = False) -> None:
        self.name = name
        # Whether its code runs loops on the thread pool (runtime/fork_safety.py).
        self.dispatches_parallel_loops = dispatches_parallel_loops
        self._engine = engine  # keeps the JIT-compiled code alive
        # Custom-call trampolines (kept alive with the engine) and their pending errors.
        self._callbacks, self._callback_errors = callbacks or ((), threading.local())
        self.infeed, self.outfeed = feeds or (None, None)
        self.compile_stats = compile_stats or {"cache_hits": 0}
        self.pass_stages = pass_stages  # (stage, pass, text) after every pass, when asked
        self.parameter_shapes = parameter_shapes
        self.result_shape = result_shape
        self.stages = stages
        # An entry returning a dynamic array returns (padded, sizes...): the caller gets the
        # padded array sliced to the sizes (dialect/ops_dynamic.py).
        self.dynamic_result = dynamic_result_of(stages.get("hlo", ""), result_shape)
        self.num_replicas = num_replicas
        self._params = [[LeafSpec.of(leaf) for leaf in _leaves(s)] for s in parameter_shapes]
        self._results = [LeafSpec.of(leaf) for leaf in result_leaves]
        leaves = [leaf for group in self._params for leaf in group] + self._results
        offsets = np.cumsum([0] + [leaf.words for leaf in leaves])[:-1].tolist()
        # One int64 buffer per thread holds every descriptor, then one slot per argument
        # with its descriptor's address, then the packed argument array pointing at
        # those slots. Only the data pointers change from call to call.
        count = len(leaves)
        slots = sum(leaf.words for leaf in leaves)
        self._template = [0] * (slots + 2 * count)
        for leaf, at in zip(leaves, offsets):
            rank = len(leaf.dims)
            self._template[at + 3: at + 3 + rank] = leaf.dims
            self._template[at + 3 + rank: at + 3 + 2 * rank] = [
                s // leaf.dtype.itemsize for s in leaf.byte_strides]
        self._offsets = offsets
        self._slots, self._count = slots, count
        self._single = all(len(group) == 1 and not shape.is_tuple()
                           for group, shape in zip(self._params, parameter_shapes))
        self._fast = [(group[0], at) for group, at in zip(self._params, offsets)] if self._single else []
        self._result_offsets = offsets[len(offsets) - len(self._results):]
        self._local = threading.local()
        self._dynamic = dynamic_strides
        self._make_variant = strided_variant
        self._variant: Executable | None = None
        self._array_result = result_shape.is_array()
        # raw_lookup resolves the *packed* wrapper `_mlir__mlir_ciface_main(void **args)`,
        # where args[i] points to argument i, itself a pointer to a memref descriptor.
        address = engine.raw_lookup("_mlir_ciface_main")
        if not address:
            raise RuntimeError("the compiled module has no _mlir_ciface_main")
        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
        self._address = address
        # The C path takes plain arrays in and out; custom calls (their errors are checked
        # after the call), replicas, dynamic shapes and strides stay on the ctypes path.
        self._fast_fits = (
            self._single and not dynamic_strides and not self._callbacks and num_replicas == 1
            and self.dynamic_result is None and _flat_arrays(result_shape)
            and all(spec.order == "C" for spec in self._results) and 0 < len(self._results)
            and count <= 64)
        self._fast_pending = self._fast_fits
        self._fast_run: Callable[[tuple[Any, ...]], Any] | None = None
        self._calls = 0

    def _run_sequentially(self, compile_sequential: Callable[[], Executable]) -> None:
        """In a forked child without the parent's thread pool (runtime/fork_safety.py): every
        call from now on runs a copy of this program whose loops run on the calling thread,
        compiled on the first call."""
        twin: list[Executable] = []

        def run(args: tuple[Any, ...]) -> Any:
            if not twin:
                twin.append(compile_sequential())
            return twin[0](*args)

        self._fast_pending = False
        self._fast_run = run

    def _use_fastcall(self) -> bool:
        """Switch this executable's calls to the C path when it takes them and can be built."""
        self._fast_pending = False
        module = fastcall.module() if self._fast_fits else None
        if module is None:
            return False
        leaves = [spec for group in self._params for spec in group] + self._results
        described = [(spec.dtype, spec.dims, spec.byte_strides, at)
                     for spec, at in zip(leaves, self._offsets)]
        template = np.array(self._template[:self._slots], dtype=np.int64).tobytes()
        try:
            runner = module.FastCall(self._address, described[:len(self._fast)],
                                     described[len(self._fast):], template,
                                     not self._array_result)
        except ValueError:  # more descriptor words than the C path keeps on its stack
            return False
        self._fast_run = runner.run
        return True

    def _buffer(self) -> tuple[Any, int]:
        """This thread's descriptor buffer and the address of its packed argument array."""
        cached = getattr(self._local, "buffer", None)
        if cached is not None:
            return cached
        buffer = (ctypes.c_int64 * len(self._template))(*self._template)
        base = ctypes.addressof(buffer)
        slots, count = self._slots, self._count
        for i, at in enumerate(self._offsets):
            buffer[slots + i] = base + 8 * at
            buffer[slots + count + i] = base + 8 * (slots + i)
        self._local.buffer = (buffer, base + 8 * (slots + count))
        return self._local.buffer

    def program_shape(self) -> tuple[list[Shape], Shape]:
        return list(self.parameter_shapes), self.dynamic_result or self.result_shape

    def as_hlo_text(self) -> str:
        """The program (its `hlo` stage) in XLA's HLO text format."""
        return hlo_text(self.stages[next(iter(self.stages))], self.name)

    # N replicas on N threads (runtime/replicas/).
    execute_replicated = execute_replicated
    # Ahead-of-time export: `exe.export("out/libname.so")` (runtime/export.py).
    export = export_executable
    # Inspection (runtime/inspection.py).
    dump = dump_stages
    stage_diff = stage_diff
    _repr_html_ = executable_html

    def bisect(self, *args: Any, reference: Any = None, rtol: float = 1e-5,
               atol: float = 1e-6) -> Any:
        """Run the program after every pass (finished by the default pipeline); print and
        return a `runtime.bisect.BisectReport` naming the first pass whose result differs
        from `reference` (default: the `linalg` stage's result) beyond the tolerances."""
        # Lazy: bisect compiles every candidate (bisect -> compiler -> executable).
        from .bisect import bisect_executable

        report = bisect_executable(self, args, reference=reference, rtol=rtol, atol=atol)
        print(report)
        return report

    #: The CPU the code was generated for ("host" or an LLVM CPU name; runtime/targets.py).
    target_cpu: str = "host"
    #: Whether the compile ran with XLAMLIR_KEEP_OBJECT=1 (the engine may keep the object
    #: for the disk cache without it).
    keeps_object: bool = True
    #: Whether the machine code calls the runtime library (runtime/shared_runtime.py).
    runtime_library: bool = False

    def write_object(self, path: str) -> None:
        """Write the JIT's machine code (an ELF object) to `path`, for a disassembler; needs
        the compile to have run with XLAMLIR_KEEP_OBJECT=1 (else CompileError). An
        executable loaded from the disk cache writes its shared library (the same code)."""
        if self.keeps_object:
            self._engine.dump_to_object_file(str(path))
        if not self.keeps_object or not os.path.exists(path) or os.path.getsize(path) == 0:
            raise CompileError("write_object: no machine code kept; compile with the environment "
                               "variable XLAMLIR_KEEP_OBJECT=1", "jit")

    def __repr__(self) -> str:
        params = ", ".join(map(str, self.parameter_shapes))
        return f"Executable({self.name!r}: ({params}) -> {self.result_shape})"

    def seed(self, n: int) -> None:
        """Restart the random ops' stream (rng_uniform/normal/bernoulli) from seed `n`;
        a fresh executable starts from seed 0."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
            raise ArgumentError(f"seed must be an int, got {n!r}")
        set_rng_seed(self._engine, int(n) & (2**64 - 1))
        if self._variant is not None:
            set_rng_seed(self._variant._engine, int(n) & (2**64 - 1))

    def _call_strided(self, args: tuple[Any, ...]) -> Any:
        """Run the strided-input variant, carrying the random state over and back."""
        variant = self._strided()
        set_rng_state(variant._engine, rng_state(self._engine))
        try:
            return variant(*args)
        finally:
            set_rng_state(self._engine, rng_state(variant._engine))

    def _wants_variant(self, array: np.ndarray, spec: LeafSpec) -> bool:
        """A strided view of the right type runs in place on the dynamic-stride variant."""
        return (self._make_variant is not None and array.dtype == spec.dtype
                and array.shape == spec.dims and array.size > 1 and strides_fit(array))

    def _strided(self) -> Executable:
        if self._variant is None:
            assert self._make_variant is not None
            self._variant = self._make_variant()
        return self._variant

    def _arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != len(self._params):
            shapes = ", ".join(map(str, self.parameter_shapes))
            hint = ""
            tuples = [i for i, s in enumerate(self.parameter_shapes) if s.is_tuple()]
            if tuples and len(args) > len(self._params):
                first = tuples[0]
                hint = (f"; parameter {first} is the tuple {self.parameter_shapes[first]}: pass a "
                        f"tuple of its {len(self.parameter_shapes[first].tuple_shapes)} arrays as one "
                        "argument")
            raise ArgumentError(f"{self.name} takes {len(self._params)} argument(s) ({shapes}), "
                                f"got {len(args)}{hint}")
        arrays: list[np.ndarray] = []
        for i, (arg, specs, shape) in enumerate(zip(args, self._params, self.parameter_shapes)):
            if shape.is_tuple():
                values = _flatten_value(arg, shape, f"argument {i}")
            else:
                values = [arg]
            for j, (value, spec) in enumerate(zip(values, specs)):
                where = f"argument {i}" if len(specs) == 1 else f"argument {i} leaf {j}"
                arrays.append(coerce(spec, value, where, self._dynamic))
        return arrays

    def __call__(self, *args: Any) -> Any:
        run = self._fast_run
        if run is not None:
            result = run(args)
            if result is not NotImplemented:
                return result
        elif self._fast_pending:
            self._calls += 1
            if self._calls >= fastcall.WARM_CALLS:
                self._use_fastcall()
        return self._call_ctypes(args)

    def _call_ctypes(self, args: tuple[Any, ...]) -> Any:
        """The general call: coerces what needs it, takes every layout and custom call."""
        local = self._local.__dict__
        buffer, packed = local.get("buffer") or self._buffer()
        if self._single and len(args) == len(self._fast) and not self._dynamic:
            inputs = []
            for arg, (spec, _) in zip(args, self._fast):
                kind = type(arg)
                if kind is np.ndarray:
                    if not (arg.dtype == spec.dtype and arg.shape == spec.dims
                            and arg.strides == spec.byte_strides):
                        if self._wants_variant(arg, spec):
                            return self._call_strided(args)
                        arg = coerce(spec, arg, f"argument {len(inputs)}")
                elif kind is spec.scalar_type and not spec.dims:
                    arg = np.array(arg)
                else:
                    arg = coerce(spec, arg, f"argument {len(inputs)}")
                inputs.append(arg)
        else:
            inputs = self._arrays(args)
        outputs = [spec.allocate() for spec in self._results]
        for array, at in zip(inputs + outputs, self._offsets):
            address = _address(array)
            buffer[at] = address
            buffer[at + 1] = address
        if self._dynamic:
            for array, at in zip(inputs, self._offsets):
                rank = array.ndim
                buffer[at + 3 + rank: at + 3 + 2 * rank] = [st // array.itemsize for st in array.strides]
        self._entry(packed)
        pending = self._callback_errors.__dict__.pop("pending", None)
        if pending:

            if isinstance(pending[0], XlaError):
                raise pending[0]
            raise CustomCallError(f"a custom call failed during {self.name}: {pending[0]!r}") \
                from pending[0]
        return outputs[0] if self._array_result else self._package(outputs)

    def _package(self, outputs: list[np.ndarray]) -> Any:
        if self.dynamic_result is not None:
            return slice_to_sizes(self.dynamic_result, outputs)
        if self.result_shape.is_array():
            return outputs[0]
        it = iter(outputs)

        def build(shape: Shape) -> Any:
            if shape.is_tuple():
                return tuple(build(s) for s in shape.tuple_shapes)
            return None if shape.is_token() else next(it)

        return build(self.result_shape)


def _interface_address(array: np.ndarray) -> int:
    return array.__array_interface__["data"][0]


def _struct_address_reader() -> Callable[[np.ndarray], int] | None:
    """A reader of the `data` field of numpy's PyArrayObject (public C API: the first field
    after the object header), 4-10x faster than `__array_interface__` (which builds a dict,
    ~2 us) or `ctypes.from_buffer`. Used only if it agrees with `__array_interface__` on
    arrays of every kind here (views, read-only, reversed, 0-d, empty)."""
    read = ctypes.c_size_t.from_address
    offset = object.__basicsize__  # ob_refcnt + ob_type on this build

    def address(array: np.ndarray, _read: Any = read, _id: Any = id) -> int:
        return _read(_id(array) + offset).value

    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    frozen = base.copy()
    frozen.flags.writeable = False
    samples = [base, base[1:, 2:], base[::-1, ::2], base.T, frozen, np.array(1.0), np.zeros((0, 3)),
               np.float32([1, 2, 3])[1:]]
    try:
        if all(address(a) == _interface_address(a) for a in samples):
            return address
    except (ValueError, OSError):  # an unexpected object layout
        pass
    return None


# The data pointer of any numpy array (the address of its element 0).
_address: Callable[[np.ndarray], int] = _struct_address_reader() or _interface_address


def _flat_arrays(shape: Shape) -> bool:
    """An array, or a tuple of arrays: what the C path returns as is."""
    return shape.is_array() or (shape.is_tuple() and bool(shape.tuple_shapes)
                                and all(s.is_array() for s in shape.tuple_shapes))


def _leaves(shape: Shape) -> list[Shape]:
    return shape.flatten() if shape.is_tuple() else [shape]


def _flatten_value(value: Any, shape: Shape, where: str) -> list[Any]:
    if not shape.is_tuple():
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
        raise ArgumentError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} values for "
                            f"{shape}, got {type(value).__name__}")
    return [leaf for v, s in zip(value, shape.tuple_shapes) for leaf in _flatten_value(v, s, where)]
