"""Layouts of the entry function's parameters and result, kept as MLIR argument/result attributes.

A tensor type has no layout, so a non-default one travels beside it: an array
gets ``{xhlo.layout = array<i64: minor_to_major...>}``; a tuple whose leaves
are not all row-major gets ``{xhlo.leaf_layouts = [array<i64: ...>, ...]}``,
one entry per array leaf in ``Shape.flatten()`` order. The builder writes
these; the verifier, the HLO printer and the entry boundary read them, so a
tuple parameter's leaf layouts reach ``exe.program_shape()``, the compiled
code and an exported library alike. Imports `dialect.shape` only (and MLIR).
"""

from __future__ import annotations

from typing import Any

from mlir import ir

from .shape import Shape

LAYOUT_ATTR = "xhlo.layout"
LEAF_LAYOUTS_ATTR = "xhlo.leaf_layouts"


def _array_leaves(shape: Shape) -> list[Shape]:
    return [leaf for leaf in shape.flatten() if leaf.is_array()]


def has_layout_entry(shape: Shape) -> bool:
    """Whether `shape` needs an attribute entry (some array in it is not row-major)."""
    if shape.is_tuple():
        return any(not leaf.has_default_layout() for leaf in _array_leaves(shape))
    return shape.is_array() and not shape.has_default_layout()


def layout_entry(shape: Shape) -> ir.DictAttr:
    """The attribute dictionary for one argument or result of shape `shape` (in a context)."""
    if not has_layout_entry(shape):
        return ir.DictAttr.get({})
    if shape.is_tuple():
        leaves = [ir.DenseI64ArrayAttr.get(list(_minor_to_major(leaf)))
                  for leaf in _array_leaves(shape)]
        return ir.DictAttr.get({LEAF_LAYOUTS_ATTR: ir.ArrayAttr.get(leaves)})
    return ir.DictAttr.get({LAYOUT_ATTR: ir.DenseI64ArrayAttr.get(list(_minor_to_major(shape)))})


def _minor_to_major(shape: Shape) -> tuple[int, ...]:
    if shape.layout is not None:
        return tuple(shape.layout.minor_to_major)
    return tuple(range(shape.rank - 1, -1, -1))


def _entry(attrs: Any, index: int) -> ir.DictAttr | None:
    if attrs is None:
        return None
    entries = list(ir.ArrayAttr(attrs))
    return ir.DictAttr(entries[index]) if index < len(entries) else None


def leaf_layouts(attrs: Any, index: int, shape: Shape) -> list[tuple[int, ...] | None]:
    """The layout of each array leaf of argument/result `index` (None: row-major), given the
    function's `arg_attrs`/`res_attrs` (or None) and the value's layout-free `shape`."""
    count = len(_array_leaves(shape)) if shape.is_tuple() else 1
    entry = _entry(attrs, index)
    if entry is None:
        return [None] * count
    if shape.is_tuple():
        if LEAF_LAYOUTS_ATTR not in entry:
            return [None] * count
        layouts = [tuple(ir.DenseI64ArrayAttr(a)) for a in ir.ArrayAttr(entry[LEAF_LAYOUTS_ATTR])]
        if len(layouts) != count:
            raise ValueError(f"{LEAF_LAYOUTS_ATTR} has {len(layouts)} entries for the "
                             f"{count} arrays of {shape}")
        return list(layouts)
    return [tuple(ir.DenseI64ArrayAttr(entry[LAYOUT_ATTR])) if LAYOUT_ATTR in entry else None]


def with_entry_layouts(shape: Shape, attrs: Any, index: int) -> Shape:
    """`shape` (read from a function type, so row-major) with the layouts its attributes give."""
    layouts = iter(leaf_layouts(attrs, index, shape))

    def build(s: Shape) -> Shape:
        if s.is_tuple():
            return Shape.tuple([build(t) for t in s.tuple_shapes])
        if not s.is_array():
            return s
        layout = next(layouts)
        return s if layout is None else s.with_layout(layout)

    return build(shape)
