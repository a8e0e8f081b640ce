"""Executable: a JIT-compiled computation called on numpy arrays.

The entry point `_mlir_ciface_main(memref descriptors...)` is called through
ctypes, which releases the GIL for the duration of the native call. The call
path only checks arguments, fills one int64 buffer of descriptors and
allocates the results. Imports `dialect` and `runtime.arguments`.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ArgumentError
from ..dialect.shapes import Shape
from .arguments import LeafSpec, coerce, fill_descriptor


class Executable:
    """Call it with one argument per parameter; a tuple parameter takes a Python tuple."""

    def __init__(self, *, name: str, engine: Any, parameter_shapes: list[Shape],
                 result_shape: Shape, result_leaves: list[Shape], stages: dict[str, str],
                 num_replicas: int = 1) -> None:
        self.name = name
        self._engine = engine  # keeps the JIT-compiled code alive
        self.parameter_shapes = parameter_shapes
        self.result_shape = result_shape
        self.stages = stages
        self.num_replicas = num_replicas
        self._params = [[LeafSpec.of(leaf) for leaf in _leaves(s)] for s in parameter_shapes]
        self._results = [LeafSpec.of(leaf) for leaf in result_leaves]
        leaves = [leaf for group in self._params for leaf in group] + self._results
        self._offsets = np.cumsum([0] + [leaf.words for leaf in leaves])[:-1].tolist()
        # After the descriptors: one slot per argument holding its descriptor's address,
        # then the packed argument array pointing at those slots.
        self._count = len(leaves)
        self._slots = sum(leaf.words for leaf in leaves)
        self._words = self._slots + 2 * self._count
        # raw_lookup resolves the *packed* wrapper `_mlir__mlir_ciface_main(void **args)`,
        # where args[i] points to argument i, itself a pointer to a memref descriptor.
        address = engine.raw_lookup("_mlir_ciface_main")
        if not address:
            raise RuntimeError("the compiled module has no _mlir_ciface_main")
        self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)

    def program_shape(self) -> tuple[list[Shape], Shape]:
        return list(self.parameter_shapes), self.result_shape

    def __repr__(self) -> str:
        params = ", ".join(map(str, self.parameter_shapes))
        return f"Executable({self.name!r}: ({params}) -> {self.result_shape})"

    def _arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        if len(args) != len(self._params):
            raise ArgumentError(f"{self.name} takes {len(self._params)} argument(s), "
                                f"got {len(args)}")
        arrays: list[np.ndarray] = []
        for i, (arg, specs, shape) in enumerate(zip(args, self._params, self.parameter_shapes)):
            if shape.is_tuple():
                values = _flatten_value(arg, shape, f"argument {i}")
            else:
                values = [arg]
            for j, (value, spec) in enumerate(zip(values, specs)):
                where = f"argument {i}" if len(specs) == 1 else f"argument {i} leaf {j}"
                arrays.append(coerce(spec, value, where))
        return arrays

    def __call__(self, *args: Any) -> Any:
        inputs = self._arrays(args)
        outputs = [spec.allocate() for spec in self._results]
        buffer = np.empty(self._words, np.int64)
        base = buffer.__array_interface__["data"][0]
        slots, count = self._slots, self._count
        for array, at in zip(inputs + outputs, self._offsets):
            fill_descriptor(buffer, at, array, array.itemsize)
        buffer[slots: slots + count] = [base + 8 * at for at in self._offsets]
        buffer[slots + count:] = range(base + 8 * slots, base + 8 * (slots + count), 8)
        self._entry(base + 8 * (slots + count))
        return self._package(outputs, inputs)

    def _package(self, outputs: list[np.ndarray], inputs: list[np.ndarray]) -> Any:
        it = iter(outputs)

        def build(shape: Shape) -> Any:
            if shape.is_tuple():
                return tuple(build(s) for s in shape.tuple_shapes)
            return next(it)

        return build(self.result_shape)


def _leaves(shape: Shape) -> list[Shape]:
    return shape.flatten() if shape.is_tuple() else [shape]


def _flatten_value(value: Any, shape: Shape, where: str) -> list[Any]:
    if not shape.is_tuple():
        return [value]
    if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
        raise ArgumentError(f"{where}: expected a tuple of {len(shape.tuple_shapes)} values for "
                            f"{shape}, got {type(value).__name__}")
    return [leaf for v, s in zip(value, shape.tuple_shapes) for leaf in _flatten_value(v, s, where)]
