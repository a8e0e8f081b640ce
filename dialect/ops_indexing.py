"""Ops of the indexing family: gather and scatter.

Shape rules follow XLA's ShapeInference (InferGatherShape, InferScatterShape
and their dimension-number validation), including the batching dimensions
(`operand_batching_dims` / `input_batching_dims`) StableHLO added. Every
field of the dimension numbers is an attribute of its own (as dot_general's),
so the IR reads like StableHLO's.

Semantics pinned here (seeds 001/004 Gather and Scatter, SEMANTICS.md 5.I):

- gather clamps every start index into `[0, operand_dim - slice_size]`, so a
  slice always lies inside the operand (StableHLO, XLA).
- scatter skips an update window whose start is out of bounds, as a whole:
  the start must lie in `[0, operand_dim - window_size]` on every dimension
  the indices address, else none of the window's elements is applied (XLA's
  ScatterExpander; StableHLO and seed 001 would apply the in-bounds part).
- `indices_are_sorted` / `unique_indices` are recorded hints without effect.
- collapsed (gather) / inserted (scatter) and batching dimensions have a
  slice / window size of 1.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, Self

import numpy as np

from .element_types import PrimitiveType
from .errors import ShapeError
from .registry import BOOL, I64_ARRAY, INT, OpDef, Operand, define
from .shape import Shape

ProgramShape = tuple[Sequence[Shape], Shape]


# -- dimension numbers ---------------------------------------------------------------------------

def _index(value: Any, record: str, what: str) -> int:
    """A Python or numpy int (not a bool) as an int; anything else is a ShapeError."""
    if isinstance(value, (bool, np.bool_)):
        raise ShapeError(record, [], f"{what} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError(record, [], f"{what} must be an int, got {value!r}") from None


def _dims(value: Any, record: str, what: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ShapeError(record, [], f"{what} must be a sequence of ints, got {value!r}")
    return tuple(_index(v, record, what) for v in value)


class _DimensionNumbers:
    """Shared normalisation: sequences become tuples of ints, `index_vector_dim` an int,
    so instances are hashable and compare by value."""

    _INT_FIELDS: tuple[str, ...] = ("index_vector_dim",)

    def __post_init__(self) -> None:
        record = type(self).__name__
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            normal = (_index(value, record, f.name) if f.name in self._INT_FIELDS
                      else _dims(value, record, f.name))
            object.__setattr__(self, f.name, normal)

    @classmethod
    def of(cls, value: Any) -> Self:
        """An instance, or a mapping with the field names (the defaulted ones may be left out)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
            required = [f.name for f in fields(cls) if f.default is MISSING]  # type: ignore[arg-type]
            unknown = sorted(set(value) - set(names))
            missing = sorted(set(required) - set(value))
            if unknown or missing:
                raise ShapeError(cls.__name__, [], f"needs the keys {names}; unknown {unknown}, "
                                 f"missing {missing}")
            return cls(**value)
        raise ShapeError(cls.__name__, [], f"expected a {cls.__name__} or a mapping of its fields, "
                         f"got {type(value).__name__}")

    def as_attrs(self) -> dict[str, Any]:
        """The op attributes, one per field, same names."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class GatherDimensionNumbers(_DimensionNumbers):
    """How gather's output, start indices and operand dimensions relate (XLA's field names)."""

    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


@dataclass(frozen=True)
class ScatterDimensionNumbers(_DimensionNumbers):
    """How scatter's updates, scatter indices and operand dimensions relate (XLA's field names)."""

    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


GATHER_FIELDS = tuple(f.name for f in fields(GatherDimensionNumbers))
SCATTER_FIELDS = tuple(f.name for f in fields(ScatterDimensionNumbers))


# -- shared checks -------------------------------------------------------------------------------

class _Checker:
    """The checks gather and scatter share; their ShapeErrors name the op and all its
    operand shapes."""

    def __init__(self, op: str, shapes: Sequence[Shape]) -> None:
        self.op, self.shapes = op, list(shapes)

    def fail(self, rule: str) -> ShapeError:
        return ShapeError(self.op, self.shapes, rule)

    def in_range(self, what: str, dims: Sequence[int], bound: int, sorted_: bool) -> None:
        """Every dim in [0, bound), no repeats, and ascending if `sorted_`."""
        for d in dims:
            if not 0 <= d < bound:
                raise self.fail(f"{what} {tuple(dims)}: {d} is out of range [0, {bound})")
        if len(set(dims)) != len(dims):
            raise self.fail(f"{what} {tuple(dims)} repeat a dimension")
        if sorted_ and list(dims) != sorted(dims):
            raise self.fail(f"{what} {tuple(dims)} must be sorted in ascending order")

    def disjoint(self, what_a: str, a: Sequence[int], what_b: str, b: Sequence[int]) -> None:
        both = sorted(set(a) & set(b))
        if both:
            raise self.fail(f"dimension {both[0]} is in both {what_a} {tuple(a)} and {what_b} "
                            f"{tuple(b)}")

    def index_vector(self, indices: Shape, index_vector_dim: int, what: str) -> tuple[int, ...]:
        """The indices' dimensions with the implicit trailing 1 when index_vector_dim == rank."""
        if not indices.element_type.is_integral:
            raise self.fail(f"{what} must have an integer element type, got {indices.element_type}")
        if not 0 <= index_vector_dim <= indices.rank:
            raise self.fail(f"index_vector_dim {index_vector_dim} is out of range [0, "
                            f"{indices.rank}] for {what} of rank {indices.rank}")
        dims = indices.dimensions
        return dims + (1,) if index_vector_dim == indices.rank else dims

    def batching(self, operand_what: str, operand_dims: Sequence[int], operand: Shape,
                 indices_what: str, indices_dims: Sequence[int], expanded: Sequence[int],
                 index_vector_dim: int) -> None:
        """Batching dims: in range, paired one to one, of equal sizes, not the index vector."""
        self.in_range(operand_what, operand_dims, operand.rank, sorted_=True)
        self.in_range(indices_what, indices_dims, len(expanded), sorted_=False)
        if index_vector_dim in indices_dims:
            raise self.fail(f"{indices_what} {tuple(indices_dims)} contain index_vector_dim "
                            f"{index_vector_dim}")
        if len(operand_dims) != len(indices_dims):
            raise self.fail(f"{operand_what} {tuple(operand_dims)} and {indices_what} "
                            f"{tuple(indices_dims)} must have the same length")
        for od, idim in zip(operand_dims, indices_dims):
            if operand.dimensions[od] != expanded[idim]:
                raise self.fail(f"batching dimension sizes differ: operand dimension {od} has size "
                                f"{operand.dimensions[od]}, indices dimension {idim} has size "
                                f"{expanded[idim]}")

    def index_map(self, what: str, mapping: Sequence[int], operand: Shape, vector_size: int,
                  batching_what: str, batching: Sequence[int]) -> None:
        if len(mapping) != vector_size:
            raise self.fail(f"{what} {tuple(mapping)} must have one entry per element of the index "
                            f"vector ({vector_size})")
        self.in_range(what, mapping, operand.rank, sorted_=False)
        self.disjoint(what, mapping, batching_what, batching)


def batch_positions(expanded_rank: int, index_vector_dim: int) -> list[int]:
    """The indices' dimensions other than the index vector dimension, in order: the
    dimensions that gather's batch / scatter's update-scatter dimensions run over."""
    return [d for d in range(expanded_rank) if d != index_vector_dim]


# -- gather --------------------------------------------------------------------------------------

def infer_gather(operand: Shape, start_indices: Shape, *, offset_dims: tuple[int, ...],
                 collapsed_slice_dims: tuple[int, ...], start_index_map: tuple[int, ...],
                 index_vector_dim: int, operand_batching_dims: tuple[int, ...],
                 start_indices_batching_dims: tuple[int, ...], slice_sizes: tuple[int, ...],
                 indices_are_sorted: bool) -> Shape:
    c = _Checker("gather", [operand, start_indices])
    for s in (operand, start_indices):
        if not s.is_array():
            raise c.fail(f"operand and start_indices must be arrays, got {s}")
    expanded = c.index_vector(start_indices, index_vector_dim, "start_indices")
    c.in_range("collapsed_slice_dims", collapsed_slice_dims, operand.rank, sorted_=True)
    c.batching("operand_batching_dims", operand_batching_dims, operand,
               "start_indices_batching_dims", start_indices_batching_dims, expanded,
               index_vector_dim)
    c.disjoint("collapsed_slice_dims", collapsed_slice_dims, "operand_batching_dims",
               operand_batching_dims)
    c.index_map("start_index_map", start_index_map, operand, expanded[index_vector_dim],
                "operand_batching_dims", operand_batching_dims)
    if len(slice_sizes) != operand.rank:
        raise c.fail(f"slice_sizes {tuple(slice_sizes)} must have one entry per operand "
                     f"dimension ({operand.rank})")
    for d, (size, dim) in enumerate(zip(slice_sizes, operand.dimensions)):
        if not 0 <= size <= dim:
            raise c.fail(f"slice size {size} of dimension {d} is out of range [0, {dim}]")
    for what, dims in (("collapsed_slice_dims", collapsed_slice_dims),
                       ("operand_batching_dims", operand_batching_dims)):
        for d in dims:
            if slice_sizes[d] != 1:
                raise c.fail(f"{what} must have slice size 1, but dimension {d} has slice size "
                             f"{slice_sizes[d]}")
    if len(offset_dims) + len(collapsed_slice_dims) + len(operand_batching_dims) != operand.rank:
        raise c.fail(f"offset_dims {tuple(offset_dims)}, collapsed_slice_dims "
                     f"{tuple(collapsed_slice_dims)} and operand_batching_dims "
                     f"{tuple(operand_batching_dims)} must together have one entry per operand "
                     f"dimension ({operand.rank})")
    batch = [expanded[d] for d in batch_positions(len(expanded), index_vector_dim)]
    rank = len(offset_dims) + len(batch)
    c.in_range("offset_dims", offset_dims, rank, sorted_=True)
    removed = set(collapsed_slice_dims) | set(operand_batching_dims)
    offsets = iter(size for d, size in enumerate(slice_sizes) if d not in removed)
    batches = iter(batch)
    dims = tuple(next(offsets) if i in offset_dims else next(batches) for i in range(rank))
    return Shape.array(operand.element_type, dims)


# -- scatter -------------------------------------------------------------------------------------

def _check_update_computation(c: _Checker, computation: ProgramShape,
                              types: Sequence[PrimitiveType]) -> None:
    """`(T_0..T_{N-1}, T_0..T_{N-1}) -> T_0` for N = 1 (a 1-tuple too), else a tuple of N."""
    n = len(types)
    params, result = list(computation[0]), computation[1]
    if len(params) != 2 * n:
        raise c.fail(f"the update_computation must take {2 * n} parameters ({n} current values, "
                     f"then {n} updates), but takes {len(params)}")
    for i, p in enumerate(params):
        t = types[i % n]
        if not (p.is_array() and p.rank == 0 and p.element_type == t):
            raise c.fail(f"the update_computation's parameter {i} must be {t}[], got {p}")
    leaves = list(result.tuple_shapes) if result.is_tuple() else [result]
    if len(leaves) != n or (n > 1 and not result.is_tuple()):
        raise c.fail(f"the update_computation must return {n} scalar(s) "
                     f"({', '.join(f'{t}[]' for t in types)}), but returns {result}")
    for i, (leaf, t) in enumerate(zip(leaves, types)):
        if not (leaf.is_array() and leaf.rank == 0 and leaf.element_type == t):
            raise c.fail(f"the update_computation's result {i} must be {t}[], got {leaf}")


def check_scatter_operands(inputs: Sequence[Shape], scatter_indices: Shape,
                           updates: Sequence[Shape]) -> _Checker:
    """Counts, arrays, equal dimensions and matching element types (checked by the builder
    too, before the update computation is traced with these types)."""
    c = _Checker("scatter", [*inputs, scatter_indices, *updates])
    if not inputs:
        raise c.fail("needs at least one operand")
    if len(updates) != len(inputs):
        raise c.fail(f"needs one updates array per operand: {len(inputs)} operand(s), "
                     f"{len(updates)} updates")
    for s in c.shapes:
        if not s.is_array():
            raise c.fail(f"operands, scatter_indices and updates must be arrays, got {s}")
    for what, group in (("operands", inputs), ("updates", updates)):
        for s in group[1:]:
            if s.dimensions != group[0].dimensions:
                raise c.fail(f"all {what} must have the same dimensions, got {group[0].dimensions} "
                             f"and {s.dimensions}")
    for i, (x, u) in enumerate(zip(inputs, updates)):
        if x.element_type != u.element_type:
            raise c.fail(f"updates {i} ({u}) must have operand {i}'s element type {x.element_type}")
    return c


def scatter_window_sizes(operand: Shape, updates: Shape, update_window_dims: Sequence[int],
                         inserted_window_dims: Sequence[int],
                         input_batching_dims: Sequence[int]) -> list[int]:
    """The update window's extent along every operand dimension (1 where inserted/batching)."""
    window = iter(updates.dimensions[d] for d in update_window_dims)
    removed = set(inserted_window_dims) | set(input_batching_dims)
    return [1 if d in removed else next(window) for d in range(operand.rank)]


def infer_scatter(inputs: tuple[Shape, ...], scatter_indices: Shape, updates: tuple[Shape, ...], *,
                  update_window_dims: tuple[int, ...], inserted_window_dims: tuple[int, ...],
                  scatter_dims_to_operand_dims: tuple[int, ...], index_vector_dim: int,
                  input_batching_dims: tuple[int, ...],
                  scatter_indices_batching_dims: tuple[int, ...], indices_are_sorted: bool,
                  unique_indices: bool, update_computation: ProgramShape) -> Shape:
    c = check_scatter_operands(inputs, scatter_indices, updates)
    operand, update = inputs[0], updates[0]
    expanded = c.index_vector(scatter_indices, index_vector_dim, "scatter_indices")
    c.in_range("update_window_dims", update_window_dims, update.rank, sorted_=True)
    c.in_range("inserted_window_dims", inserted_window_dims, operand.rank, sorted_=True)
    c.batching("input_batching_dims", input_batching_dims, operand,
               "scatter_indices_batching_dims", scatter_indices_batching_dims, expanded,
               index_vector_dim)
    c.disjoint("inserted_window_dims", inserted_window_dims, "input_batching_dims",
               input_batching_dims)
    if len(update_window_dims) + len(inserted_window_dims) + len(input_batching_dims) != operand.rank:
        raise c.fail(f"update_window_dims {tuple(update_window_dims)}, inserted_window_dims "
                     f"{tuple(inserted_window_dims)} and input_batching_dims "
                     f"{tuple(input_batching_dims)} must together have one entry per operand "
                     f"dimension ({operand.rank})")
    c.index_map("scatter_dims_to_operand_dims", scatter_dims_to_operand_dims, operand,
                expanded[index_vector_dim], "input_batching_dims", input_batching_dims)
    scatter_dims = [expanded[d] for d in batch_positions(len(expanded), index_vector_dim)]
    if update.rank != len(update_window_dims) + len(scatter_dims):
        raise c.fail(f"updates must have rank {len(update_window_dims) + len(scatter_dims)} "
                     f"(update_window_dims {tuple(update_window_dims)} plus the "
                     f"{len(scatter_dims)} scatter dimension(s) of scatter_indices), got {update}")
    removed = set(inserted_window_dims) | set(input_batching_dims)
    bounds = [n for d, n in enumerate(operand.dimensions) if d not in removed]
    for d, bound in zip(update_window_dims, bounds):
        if update.dimensions[d] > bound:
            raise c.fail(f"updates window dimension {d} has size {update.dimensions[d]}, more "
                         f"than the operand's {bound}")
    update_scatter = [d for d in range(update.rank) if d not in update_window_dims]
    for d, size in zip(update_scatter, scatter_dims):
        if update.dimensions[d] != size:
            raise c.fail(f"updates scatter dimension {d} has size {update.dimensions[d]} but "
                         f"scatter_indices has {size} there (dimensions "
                         f"{tuple(scatter_dims)} without index_vector_dim)")
    _check_update_computation(c, update_computation, [s.element_type for s in inputs])
    return Shape.tuple([s.with_default_layout() for s in inputs])


define(OpDef("gather", (Operand("operand"), Operand("start_indices")),
             {**{name: INT if name == "index_vector_dim" else I64_ARRAY for name in GATHER_FIELDS},
              "slice_sizes": I64_ARRAY, "indices_are_sorted": BOOL},
             infer_gather,
             doc="Stitch together slices of the operand at runtime start indices (spec#gather)."))
define(OpDef("scatter", (Operand("inputs", variadic=True), Operand("scatter_indices"),
                         Operand("updates", variadic=True)),
             {**{name: INT if name == "index_vector_dim" else I64_ARRAY for name in SCATTER_FIELDS},
              "indices_are_sorted": BOOL, "unique_indices": BOOL},
             infer_scatter, results=None, computations=("update_computation",),
             doc="Combine update windows into N arrays at runtime indices (spec#scatter)."))
