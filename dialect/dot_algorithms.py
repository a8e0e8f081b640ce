"""dot_general's algorithms: XLA's PrecisionConfig.Algorithm presets (StableHLO's
`#stablehlo.dot_algorithm`, jax's `lax.DotAlgorithmPreset`), and which operand and result
types each accepts.

An algorithm names the precision the operands are rounded to, the accumulation type and
how many primitive products emulate one (bf16 x3/x6/x9 and tf32 x3 split an f32 into
parts). The storage rules are XLA's (xla/service/algorithm_util.cc: its operand types
per algorithm and IsSupportedDotAlgorithmOnGpu's result types), the numerics XLA's
emulations (xla/service/gpu/transforms/dot_algorithm_rewriter.cc); the builder builds
them from plain ops (builder/methods_dot.py). XLA:CPU itself ignores the algorithm (jax
says so where it lowers dot_general, and refuses the tf32, x9, f16->f32 and bf16->bf16
presets on CPU); this library computes what the algorithm asks for.

The ANY_F8 presets are not here: they are refused. Imports `dialect.element_types`,
`dialect.errors`, `dialect.shape`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .element_types import PrimitiveType
from .errors import ShapeError
from .shape import Shape

P = PrimitiveType


@dataclass(frozen=True)
class DotAlgorithm:
    """One preset: StableHLO's attribute fields, and the storage types XLA accepts with it."""

    name: str
    lhs_precision_type: str
    rhs_precision_type: str
    accumulation_type: str
    num_primitive_operations: int
    operands: tuple[PrimitiveType, ...]  # lhs and rhs have the same one of these
    results: dict[PrimitiveType, tuple[PrimitiveType, ...]]  # operand type -> result types

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.lhs_precision_type, self.rhs_precision_type, self.accumulation_type,
                self.num_primitive_operations)


def _preset(name: str, precision: str, accumulation: str, ops: int,
            results: dict[PrimitiveType, tuple[PrimitiveType, ...]]) -> DotAlgorithm:
    return DotAlgorithm(name, precision, precision, accumulation, ops, tuple(results), results)


_F32 = {P.F32: (P.F32,)}
ALGORITHMS: dict[str, DotAlgorithm] = {a.name: a for a in (
    _preset("F16_F16_F16", "f16", "f16", 1, {P.F16: (P.F16,)}),
    _preset("F16_F16_F32", "f16", "f32", 1, {P.F16: (P.F16, P.F32)}),
    _preset("BF16_BF16_BF16", "bf16", "bf16", 1, {P.BF16: (P.BF16,)}),
    _preset("BF16_BF16_F32", "bf16", "f32", 1, {P.BF16: (P.BF16, P.F32), P.F32: (P.F32,)}),
    _preset("BF16_BF16_F32_X3", "bf16", "f32", 3, _F32),
    _preset("BF16_BF16_F32_X6", "bf16", "f32", 6, _F32),
    _preset("BF16_BF16_F32_X9", "bf16", "f32", 9, _F32),
    _preset("TF32_TF32_F32", "tf32", "f32", 1, _F32),
    _preset("TF32_TF32_F32_X3", "tf32", "f32", 3, _F32),
    _preset("F32_F32_F32", "f32", "f32", 1, _F32),
    _preset("F64_F64_F64", "f64", "f64", 1, {P.F64: (P.F64,)}),
)}
_BY_KEY = {a.key: a for a in ALGORITHMS.values()}
OP = "dot_general"


def _type_name(t: Any) -> str:
    """'bf16' for a PrimitiveType, a numpy/jax dtype, an MLIR type or a name."""
    if isinstance(t, PrimitiveType):
        return t.mlir_name
    if not isinstance(t, str):
        try:
            t = np.dtype(t).name
        except TypeError:
            t = str(t)
    name = t.lower()
    return {"bfloat16": "bf16", "float16": "f16", "float32": "f32", "float64": "f64",
            "tensorfloat32": "tf32"}.get(name, name)


def from_fields(lhs_precision_type: Any, rhs_precision_type: Any, accumulation_type: Any,
                lhs_component_count: int = 1, rhs_component_count: int = 1,
                num_primitive_operations: int = 1,
                allow_imprecise_accumulation: bool = False) -> DotAlgorithm:
    """The preset StableHLO's `#stablehlo.dot_algorithm<...>` fields (or jax's lax.DotAlgorithm)
    describe; ShapeError for a combination no preset has."""
    key = (_type_name(lhs_precision_type), _type_name(rhs_precision_type), _type_name(accumulation_type),
           int(num_primitive_operations))
    algorithm = _BY_KEY.get(key)
    if algorithm is None or (lhs_component_count, rhs_component_count) != (1, 1) \
            or allow_imprecise_accumulation:
        raise ShapeError(OP, [], f"no supported dot algorithm has lhs/rhs precision {key[0]}/{key[1]}, "
                         f"accumulation {key[2]}, component counts {lhs_component_count}/"
                         f"{rhs_component_count}, {num_primitive_operations} primitive operations"
                         f"{' and imprecise accumulation' if allow_imprecise_accumulation else ''}; "
                         f"supported: {', '.join(ALGORITHMS)}")
    return algorithm


def dot_algorithm(value: Any) -> DotAlgorithm | None:
    """None for the default; a preset from its name ("BF16_BF16_F32_X3", also with XLA's
    "ALG_DOT_" prefix, any case), from an enum member with that `.name` (jax's
    lax.DotAlgorithmPreset), or from an object with StableHLO's fields (jax's lax.DotAlgorithm)."""
    if value is None:
        return None
    if isinstance(value, DotAlgorithm):
        return value
    if hasattr(value, "lhs_precision_type"):
        return from_fields(*(getattr(value, f) for f in (
            "lhs_precision_type", "rhs_precision_type", "accumulation_type", "lhs_component_count",
            "rhs_component_count", "num_primitive_operations", "allow_imprecise_accumulation")))
    name = getattr(value, "name", value)
    if not isinstance(name, str):
        raise ShapeError(OP, [], f"algorithm must be None, a preset name or a DotAlgorithm, got {value!r}")
    name = name.upper().removeprefix("ALG_").removeprefix("DOT_")
    if name in ("DEFAULT", "UNSET"):
        return None
    if name not in ALGORITHMS:
        raise ShapeError(OP, [], f"unknown or unsupported dot algorithm {value!r}; supported: "
                         f"{', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def check_types(algorithm: DotAlgorithm, shapes: list[Shape], result: PrimitiveType) -> None:
    """XLA's storage rule: lhs and rhs of one accepted type, a result type allowed with it."""
    lhs, rhs = (s.element_type for s in shapes)
    if lhs != rhs or lhs not in algorithm.results or result not in algorithm.results[lhs]:
        allowed = "; ".join(f"{t} operands -> {' or '.join(str(r) for r in rs)}"
                            for t, rs in algorithm.results.items())
        raise ShapeError(OP, shapes, f"algorithm {algorithm.name} takes {allowed}; got {lhs} and {rhs} "
                         f"operands -> {result}")
