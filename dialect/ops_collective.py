"""Ops of the collective family: replica_id, partition_id and the cross-replica collectives.

Every replica runs the same program; a collective exchanges data between the
replicas of a *replica group*. Groups are held as XLA's text form
(`replica_groups="{{0,2},{1,3}}"`, `"{}"` meaning one group of every replica),
so the `hlo` stage reads as XLA's HLO does. The shape rules check what the
program alone decides (group syntax, duplicates, sizes against shard counts);
the checks that need the replica count run when `compile(..., num_replicas=N)`
knows it (`check_replica_groups`).

- `all_reduce(operands...) {computation, replica_groups, channel_id}`: every
  operand (a tuple operand is several) reduced element-wise across its group;
  the computation is a reducer `(acc..., x...) -> (acc...)`, as for reduce.
- `all_gather(operand) {all_gather_dim, shard_count, ...}`: the group's operands
  concatenated along `all_gather_dim` in group order.
- `all_to_all(operand) {split_dimension, concat_dimension, split_count, ...}`.
- `reduce_scatter(operands...) {computation, scatter_dimension, shard_count, ...}`.
- `collective_permute(operand) {source_target_pairs}`: replicas no pair targets get zeros.
- `collective_broadcast(operand) {replica_groups}`: the first replica of each group
  sends; replicas outside every group get zeros.
- `ragged_all_to_all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes)`
  (XLA's HLO operand order): row slices of variable length sent to each member of the
  group, written into the receiver's copy of `output` at the sender's output_offsets.

Imports `dialect.registry`, `dialect.shape`, `dialect.errors`, `dialect.ops_reduce`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .element_types import PrimitiveType
from .errors import ShapeError
from .ops_reduce import ProgramShape, verify_reducer
from .registry import INT, PAIRS, STR, OpDef, Operand, define
from .shape import Shape

REPLICA_ID = Shape.array(PrimitiveType.U32, ())
_GROUPS = re.compile(r"\{\s*(\{[\d\s,]*\}\s*(,\s*\{[\d\s,]*\}\s*)*)?\}")


def parse_replica_groups(text: str) -> list[list[int]]:
    """`"{{0,2},{1,3}}"` -> [[0, 2], [1, 3]]; `"{}"` -> [] (one group of all replicas)."""
    if not _GROUPS.fullmatch(text.strip()):
        raise ValueError(f"replica_groups {text!r} is not of the form {{{{0,1}},{{2,3}}}}")
    inner = text.strip()[1:-1]
    return [[int(x) for x in g.split(",") if x.strip()] for g in re.findall(r"\{([^{}]*)\}", inner)]


def format_replica_groups(groups: Sequence[Sequence[int]]) -> str:
    return "{" + ",".join("{" + ",".join(str(int(r)) for r in g) + "}" for g in groups) + "}"


def check_groups(op: str, shapes: Sequence[Shape], text: str, size: int | None = None,
                 what: str = "shard_count") -> list[list[int]]:
    """The rules that do not need the replica count: syntax, non-empty groups, no replica
    twice, and (for the ops that split or gather by group) every group of `size` replicas."""
    try:
        groups = parse_replica_groups(text)
    except ValueError as e:
        raise ShapeError(op, shapes, str(e)) from None
    seen: set[int] = set()
    for g in groups:
        if not g:
            raise ShapeError(op, shapes, f"replica group {{}} in {text} is empty")
        for r in g:
            if r in seen:
                raise ShapeError(op, shapes, f"replica {r} appears twice in replica_groups {text}")
            seen.add(r)
        if len(g) != len(groups[0]):
            raise ShapeError(op, shapes, f"replica groups must all have the same size (StableHLO's "
                             f"replica_groups is a 2-D tensor), got {text}")
        if size is not None and len(g) != size:
            raise ShapeError(op, shapes, f"every replica group must have {what} = {size} replicas, "
                             f"but {format_replica_groups([g])} has {len(g)}")
    return groups


def _channel(op: str, shapes: Sequence[Shape], channel_id: int) -> None:
    if channel_id < 0:
        raise ShapeError(op, shapes, f"channel_id must be positive (0: none), got {channel_id}")


def require_arrays(op: str, shapes: Sequence[Shape], allow_many: bool = False) -> None:
    """One array operand (or, with `allow_many`, one or more); the builder checks this too,
    before tracing a computation with the operands' element types."""
    if not shapes:
        raise ShapeError(op, [], "needs at least one operand")
    if len(shapes) > 1 and not allow_many:
        raise ShapeError(op, list(shapes), "takes one array operand")
    for s in shapes:
        if not s.is_array():
            raise ShapeError(op, list(shapes), f"operands must be arrays (a tuple operand is given as "
                             f"its elements), got {s}")


def _dimension(op: str, shapes: Sequence[Shape], d: int, rank: int, what: str) -> None:
    if not 0 <= d < rank:
        raise ShapeError(op, list(shapes), f"{what} {d} is out of range for rank {rank}")


def per_operand(operands: Sequence[Shape], computation: ProgramShape) -> bool:
    """Whether a binary computation reduces each of several operands on its own (XLA's
    tuple all-reduce), rather than a variadic `(acc..., x...)` one reducing them together."""
    return len(operands) > 1 and len(computation[0]) == 2


def _reducer(op: str, operands: Sequence[Shape], computation: ProgramShape) -> None:
    if per_operand(operands, computation):
        for s in operands:
            scalar = [Shape.array(s.element_type, ())]
            verify_reducer(op, list(operands), computation, scalar, [s.element_type])
        return
    for s in operands[1:]:
        if s.dimensions != operands[0].dimensions:
            raise ShapeError(op, list(operands), f"a computation of {2 * len(operands)} parameters "
                             f"reduces the operands together, so they must have the same dimensions "
                             f"(a binary computation reduces each on its own)")
    scalars = [Shape.array(s.element_type, ()) for s in operands]
    verify_reducer(op, list(operands), computation, scalars, [s.element_type for s in operands])


def _results(operands: Sequence[Shape]) -> Shape:
    return Shape.tuple([s.with_default_layout() for s in operands])


# -- shape rules ---------------------------------------------------------------------------------

def infer_replica_id() -> Shape:
    return REPLICA_ID


def infer_partition_id() -> Shape:
    return REPLICA_ID


def infer_all_reduce(operands: tuple[Shape, ...], *, computation: ProgramShape, replica_groups: str,
                     channel_id: int) -> Shape:
    op = "all_reduce"
    require_arrays(op, operands, allow_many=True)
    check_groups(op, operands, replica_groups)
    _channel(op, operands, channel_id)
    _reducer(op, operands, computation)
    return _results(operands)


def infer_reduce_scatter(operands: tuple[Shape, ...], *, computation: ProgramShape,
                         scatter_dimension: int, shard_count: int, replica_groups: str,
                         channel_id: int) -> Shape:
    op = "reduce_scatter"
    require_arrays(op, operands, allow_many=True)
    if shard_count < 1:
        raise ShapeError(op, operands, f"shard_count must be >= 1, got {shard_count}")
    check_groups(op, operands, replica_groups, shard_count)
    _channel(op, operands, channel_id)
    _reducer(op, operands, computation)
    results = []
    for s in operands:
        _dimension(op, operands, scatter_dimension, s.rank, "scatter_dimension")
        n = s.dimensions[scatter_dimension]
        if n % shard_count:
            raise ShapeError(op, operands, f"scatter dimension {scatter_dimension} of size {n} is not "
                             f"divisible by shard_count {shard_count}")
        dims = list(s.dimensions)
        dims[scatter_dimension] = n // shard_count
        results.append(Shape.array(s.element_type, tuple(dims)))
    return Shape.tuple(results)


def infer_all_gather(operand: Shape, *, all_gather_dim: int, shard_count: int, replica_groups: str,
                     channel_id: int) -> Shape:
    op = "all_gather"
    require_arrays(op, [operand])
    if shard_count < 1:
        raise ShapeError(op, [operand], f"shard_count must be >= 1, got {shard_count}")
    check_groups(op, [operand], replica_groups, shard_count)
    _channel(op, [operand], channel_id)
    _dimension(op, [operand], all_gather_dim, operand.rank, "all_gather_dim")
    dims = list(operand.dimensions)
    dims[all_gather_dim] *= shard_count
    return Shape.array(operand.element_type, tuple(dims))


def infer_all_to_all(operand: Shape, *, split_dimension: int, concat_dimension: int, split_count: int,
                     replica_groups: str, channel_id: int) -> Shape:
    op = "all_to_all"
    require_arrays(op, [operand])
    if split_count < 1:
        raise ShapeError(op, [operand], f"split_count must be >= 1, got {split_count}")
    check_groups(op, [operand], replica_groups, split_count, "split_count")
    _channel(op, [operand], channel_id)
    _dimension(op, [operand], split_dimension, operand.rank, "split_dimension")
    _dimension(op, [operand], concat_dimension, operand.rank, "concat_dimension")
    n = operand.dimensions[split_dimension]
    if n % split_count:
        raise ShapeError(op, [operand], f"split dimension {split_dimension} of size {n} is not "
                         f"divisible by split_count {split_count}")
    dims = list(operand.dimensions)
    dims[split_dimension] //= split_count
    dims[concat_dimension] *= split_count
    return Shape.array(operand.element_type, tuple(dims))


def infer_collective_permute(operand: Shape, *, source_target_pairs: tuple[tuple[int, int], ...],
                             channel_id: int) -> Shape:
    op = "collective_permute"
    require_arrays(op, [operand])
    _channel(op, [operand], channel_id)
    sources: set[int] = set()
    targets: set[int] = set()
    for source, target in source_target_pairs:
        if source < 0 or target < 0:
            raise ShapeError(op, [operand], f"replica ids must be non-negative, got ({source}, {target})")
        if source in sources:
            raise ShapeError(op, [operand], f"replica {source} is the source of two pairs")
        if target in targets:
            raise ShapeError(op, [operand], f"replica {target} is the target of two pairs")
        sources.add(source)
        targets.add(target)
    return operand.with_default_layout()


def infer_collective_broadcast(operand: Shape, *, replica_groups: str, channel_id: int) -> Shape:
    op = "collective_broadcast"
    require_arrays(op, [operand])
    check_groups(op, [operand], replica_groups)
    _channel(op, [operand], channel_id)
    return operand.with_default_layout()


RAGGED_INDEX_TYPES = (PrimitiveType.S32, PrimitiveType.S64)


def infer_ragged_all_to_all(input: Shape, output: Shape, input_offsets: Shape,  # noqa: A002
                            send_sizes: Shape, output_offsets: Shape, recv_sizes: Shape, *,
                            replica_groups: str, channel_id: int) -> Shape:
    """The result is `output` with the received rows written in (seed: RaggedAllToAll; XLA's
    ShapeInference::InferRaggedAllToAllShape and the HLO verifier's operand checks)."""
    op = "ragged_all_to_all"
    shapes = [input, output, input_offsets, send_sizes, output_offsets, recv_sizes]
    require_arrays(op, shapes, allow_many=True)
    groups = check_groups(op, shapes, replica_groups)
    _channel(op, shapes, channel_id)
    if input.rank < 1 or output.rank != input.rank:
        raise ShapeError(op, shapes, f"input and output must have the same rank, at least 1 (the "
                         f"ragged dimension is dimension 0), got {input} and {output}")
    if input.element_type != output.element_type:
        raise ShapeError(op, shapes, f"input and output must have one element type, got {input} "
                         f"and {output}")
    if input.dimensions[1:] != output.dimensions[1:]:
        raise ShapeError(op, shapes, f"input and output rows must have one shape (every dimension "
                         f"but 0), got {input} and {output}")
    names = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")
    metadata = shapes[2:]
    for name, s in zip(names, metadata):
        if s.rank not in (1, 2):
            raise ShapeError(op, shapes, f"{name} must have rank 1 ([num_devices]) or 2 "
                             f"([num_devices, num_updates]), got {s}")
        if s.element_type not in RAGGED_INDEX_TYPES:
            raise ShapeError(op, shapes, f"{name} must be s32 or s64, got {s}")
        if s.with_default_layout() != input_offsets.with_default_layout():
            raise ShapeError(op, shapes, f"the offsets and sizes must all have one shape, got "
                             f"input_offsets {input_offsets} and {name} {s}")
    if groups and input_offsets.dimensions[0] != len(groups[0]):
        raise ShapeError(op, shapes, f"the offsets and sizes have one row per replica of the group: "
                         f"{input_offsets.dimensions[0]} rows for groups of {len(groups[0])}")
    return output.with_default_layout()


# Which attribute sizes each op's groups (None: any size).
GROUP_SIZE_ATTR = {"all_gather": "shard_count", "reduce_scatter": "shard_count",
                   "all_to_all": "split_count", "all_reduce": None, "collective_broadcast": None,
                   "ragged_all_to_all": None}
# The ops `check_replica_groups` checks against the replica count.
GROUPED_OPS = frozenset(GROUP_SIZE_ATTR) | {"collective_permute"}


def check_replica_groups(op: str, attrs: dict[str, object], num_replicas: int) -> None:
    """The rules that need the replica count: ids below it, and groups covering every replica
    (but for collective_broadcast, where replicas outside every group receive zeros)."""
    if op == "collective_permute":
        for pair in attrs["source_target_pairs"]:  # type: ignore[attr-defined]
            for r in pair:
                if r >= num_replicas:
                    raise ShapeError(op, [], f"source_target_pairs names replica {r}, but the program "
                                     f"runs {num_replicas} replica(s)")
        return
    if op not in GROUP_SIZE_ATTR:
        return
    groups = parse_replica_groups(str(attrs["replica_groups"]))
    size_attr = GROUP_SIZE_ATTR[op]
    for g in groups:
        for r in g:
            if r >= num_replicas:
                raise ShapeError(op, [], f"replica_groups {attrs['replica_groups']} names replica {r}, "
                                 f"but the program runs {num_replicas} replica(s)")
    covered = sum(len(g) for g in groups)
    if groups and covered != num_replicas and op != "collective_broadcast":
        raise ShapeError(op, [], f"replica_groups {attrs['replica_groups']} must hold every one of the "
                         f"{num_replicas} replicas exactly once")
    if not groups and size_attr is not None and attrs[size_attr] != num_replicas:
        raise ShapeError(op, [], f"with empty replica_groups, {size_attr} ({attrs[size_attr]}) must be "
                         f"the number of replicas ({num_replicas})")


_GROUPED = {"replica_groups": STR, "channel_id": INT}

define(OpDef("replica_id", (), {}, infer_replica_id,
             doc="This replica's id, a u32 in [0, num_replicas) (spec#replica_id)."))
define(OpDef("partition_id", (), {}, infer_partition_id,
             doc="This partition's id, a u32; programs run one partition, id 0 (spec#partition_id)."))
define(OpDef("all_reduce", (Operand("operands", variadic=True),), _GROUPED,
             infer_all_reduce, results=None, computations=("computation",),
             doc="Reduce every operand element-wise across the replica group (spec#all_reduce)."))
define(OpDef("reduce_scatter", (Operand("operands", variadic=True),),
             {"scatter_dimension": INT, "shard_count": INT, **_GROUPED},
             infer_reduce_scatter, results=None, computations=("computation",),
             doc="all_reduce, then replica i of the group keeps block i of scatter_dimension "
                 "(spec#reduce_scatter)."))
define(OpDef("all_gather", (Operand("operand"),),
             {"all_gather_dim": INT, "shard_count": INT, **_GROUPED}, infer_all_gather,
             doc="Concatenate the group's operands along all_gather_dim, in group order "
                 "(spec#all_gather)."))
define(OpDef("all_to_all", (Operand("operand"),),
             {"split_dimension": INT, "concat_dimension": INT, "split_count": INT, **_GROUPED},
             infer_all_to_all,
             doc="Block i of split_dimension goes to the group's replica i; received blocks are "
                 "concatenated along concat_dimension in group order (spec#all_to_all)."))
define(OpDef("collective_permute", (Operand("operand"),),
             {"source_target_pairs": PAIRS, "channel_id": INT}, infer_collective_permute,
             doc="Send the operand from each pair's source to its target; replicas no pair targets "
                 "get zeros (spec#collective_permute)."))
define(OpDef("ragged_all_to_all", tuple(Operand(name) for name in (
                 "input", "output", "input_offsets", "send_sizes", "output_offsets", "recv_sizes")),
             _GROUPED, infer_ragged_all_to_all,
             doc="Rows input[input_offsets[j]:+send_sizes[j]] go to member j of the group, which "
                 "writes them into its output at output_offsets[j]; rows nobody writes keep "
                 "output's values (seed: RaggedAllToAll)."))
define(OpDef("collective_broadcast", (Operand("operand"),), _GROUPED, infer_collective_broadcast,
             doc="Every replica of a group gets the group's first replica's operand; replicas outside "
                 "every group get zeros (spec#collective_broadcast)."))
