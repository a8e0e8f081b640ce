"""The lowering mechanism: `@lowers("op")` functions, turned into rewrite patterns.

A lowering function receives an `OpView` of the op being rewritten: its
operands by registry name already converted to signless integer types (arith
and linalg know no `ui32`), its attributes as Python values and its shapes. It
returns the replacement values (signless); the framework casts them back to
the op's result types with `builtin.unrealized_conversion_cast`, and those
casts cancel out once every op is lowered. Imports `dialect`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from mlir import ir
from mlir.rewrite import PatternRewriter, RewritePatternSet

from ...dialect.attributes import attribute_values, operand_groups
from ...dialect.context import context_cache
from ...dialect.element_types import PrimitiveType
from ...dialect.registry import REGISTRY, OpDef, lookup
from ...dialect.shape import Shape
from ...dialect.type_shapes import shape_of_type_text

NO_MATCH = True  # a truthy return from a pattern callback means "did not apply"
ERASED = object()  # returned by a lowering that erased its op itself

LOWERINGS: dict[str, Callable[[OpView], Any]] = {}


def lowers(*names: str) -> Callable[[Callable[[OpView], Any]], Callable[[OpView], Any]]:
    """Register `fn` as the lowering of the named registry ops."""

    def register(fn: Callable[[OpView], Any]) -> Callable[[OpView], Any]:
        for name in names:
            if name in LOWERINGS:
                raise ValueError(f"op {name} has two lowerings")
            LOWERINGS[name] = fn
        return fn

    return register


_SIGNED_ELEMENT = re.compile(r"(?<=[<x, ])[su]i(\d+)\b")


_PRED_ELEMENT = re.compile(r"(?<=[<x, ])i1(?=>)")
_BF16_ELEMENT = re.compile(r"(?<=[<x, ])bf16(?=>)")
# Sub-byte integers and the narrow floats (f8E5M2, f4E2M1FN...): one byte per element.
_BYTE_ELEMENT = re.compile(r"(?<=[<x, ])(?:[su]?i[24]|f[48]E[0-9A-Z]+)(?=>)")


def signless_type(t: ir.Type) -> ir.Type:
    """The storage type of a tensor type: signless integers, i8 for pred, i16 for bf16,
    i8 for sub-byte integers (s4, u2...) and for the narrow floats (f8E5M2, f4E2M1FN...).

    PRED lives in memory as one byte per element (numpy's bool). Keeping pred
    tensors as i8 from the linalg stage on means no memref of i1 ever exists:
    LLVM 22's memref lowering asserts on scalar i1 loads/stores, and vector
    stores of i1 pack bits. BF16 is stored as i16 because LLVM legalizes bf16
    values on x86 through f32, which rewrites NaN payloads (bitcast_convert must
    keep every bit). Scalar code converts with trunci/extui/bitcast
    (`lowering.elementwise.from_storage`/`to_storage`); the pairs fold away
    between fused ops. The sub-byte integers and narrow floats are stored one per byte
    (the low bits, as numpy's ml_dtypes arrays hold them): LLVM packs vectors of i4 or
    f8-sized non-byte types bit by bit in memory.
    """
    text = str(t)
    if ("ui" not in text and "si" not in text and "i1>" not in text and "bf16>" not in text
            and "i2>" not in text and "i4>" not in text and "f8E" not in text and "f4E" not in text):
        return t
    text = _BYTE_ELEMENT.sub("i8", text)
    text = _SIGNED_ELEMENT.sub(r"i\1", text)
    text = _BF16_ELEMENT.sub("i16", _PRED_ELEMENT.sub("i8", text))
    return ir.Type.parse(text)


def cast(value: ir.Value, to: ir.Type) -> ir.Value:
    if value.type == to:
        return value
    return ir.Operation.create("builtin.unrealized_conversion_cast", results=[to],
                               operands=[value]).results[0]


def to_signless(value: ir.Value) -> ir.Value:
    return cast(value, signless_type(value.type))


def shape_of(value_or_type: ir.Value | ir.Type) -> Shape:
    t = value_or_type.type if isinstance(value_or_type, ir.Value) else value_or_type
    return shape_of_type_text(str(t))



def module_of(op: ir.Operation) -> ir.Operation:
    """The module an op is in (where lowerings declare globals and runtime functions)."""
    op = op.operation
    while op.parent is not None:
        op = op.parent
    return op


class OpView:
    """What a lowering function sees of the op it lowers."""

    def __init__(self, op: ir.Operation, opdef: OpDef, rewriter: PatternRewriter | None) -> None:
        self.op = op
        self.opdef = opdef
        self.rewriter = rewriter
        groups = operand_groups(opdef, op)
        self.args: dict[str, Any] = {}
        self.shapes: dict[str, Any] = {}
        for name, value in groups.items():
            if isinstance(value, list):
                self.args[name] = [to_signless(v) for v in value]
                self.shapes[name] = [shape_of(v) for v in value]
            else:
                self.args[name] = to_signless(value)
                self.shapes[name] = shape_of(value)
        self.attrs = attribute_values(opdef, op)
        self.result_types = [r.type for r in op.results]
        self.result_shapes = [shape_of(t) for t in self.result_types]

    @property
    def result_shape(self) -> Shape:
        return self.result_shapes[0]

    @property
    def result_type(self) -> ir.Type:
        return signless_type(self.result_types[0])

    def operand_element_type(self, name: str) -> PrimitiveType:
        return self.shapes[name].element_type


def _make_pattern(opdef: OpDef, fn: Callable[[OpView], Any]) -> Callable[..., Any]:
    def pattern(op: ir.Operation, rewriter: PatternRewriter) -> Any:
        with rewriter.ip, op.location:
            view = OpView(op, opdef, rewriter)
            result = fn(view)
            if result is NO_MATCH:
                return NO_MATCH
            if result is ERASED:
                return None
            values = [result] if isinstance(result, ir.Value) else list(result)
            values = [cast(v, t) for v, t in zip(values, view.result_types)]
        rewriter.replace_op(op, values)
        return None

    pattern.__name__ = f"lower_{opdef.name}"
    return pattern


def missing_lowerings() -> list[str]:
    return sorted(set(REGISTRY) - set(LOWERINGS))


def pattern_set(context: ir.Context) -> Any:
    """Frozen patterns lowering every registry op; fails if an op has no lowering.

    Kept with the thread's reusable context (the patterns hold no state): making the set
    of about a hundred patterns costs more than lowering a small program."""
    cache = context_cache(context)
    key = ("lowering patterns", len(REGISTRY), tuple(LOWERINGS.items()))
    frozen = cache.get(key) if cache is not None else None
    if frozen is None:
        missing = missing_lowerings()
        if missing:
            raise RuntimeError(f"ops without a lowering: {', '.join(missing)}")
        patterns = RewritePatternSet(context)
        for name, fn in LOWERINGS.items():
            patterns.add(lookup(name).full_name, _make_pattern(lookup(name), fn))
        frozen = patterns.freeze()
        if cache is not None:
            cache[key] = frozen
    return frozen

