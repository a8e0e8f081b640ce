"""CollectiveMethods: the XlaBuilder methods of the collective family. Imports `dialect`
and `builder.recorder`.

all_reduce and reduce_scatter take an array, a tuple-shaped XlaOp or a list of
arrays; the latter two give a tuple result (seed: "a non-empty tuple of
arrays"). Replica groups are given as lists of replica ids (`None` or `[]`:
one group of every replica) and reach the dialect as XLA's text form.
`cross_replica_sum` is all_reduce with an add computation.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..dialect.errors import ShapeError
from ..dialect.ops_collective import format_replica_groups, require_arrays
from ..dialect.shape import Shape
from . import args
from .recorder import Recorder
from .xla_op import XlaOp


def _groups(op: str, replica_groups: Any) -> str:
    if replica_groups is None:
        return "{}"
    if isinstance(replica_groups, (str, bytes, XlaOp)) or not isinstance(
            replica_groups, (Sequence, np.ndarray)):
        raise ShapeError(op, [], f"replica_groups must be a list of lists of replica ids, "
                         f"got {replica_groups!r}")
    groups = []
    for g in replica_groups:
        if isinstance(g, (str, bytes)) or not isinstance(g, (Sequence, np.ndarray)):
            raise ShapeError(op, [], f"replica_groups must be a list of lists of replica ids, "
                             f"got {replica_groups!r}")
        ids = args.ints(op, g, "each replica group")
        if any(r < 0 for r in ids):
            raise ShapeError(op, [], f"replica ids must be non-negative, got {replica_groups!r}")
        groups.append(list(ids))
    return format_replica_groups(groups)


def _channel(op: str, channel_id: Any) -> int:
    if channel_id is None:
        return 0
    value = args.integer(op, channel_id, "channel_id")
    if value <= 0:
        raise ShapeError(op, [], f"channel_id must be a positive int, got {channel_id!r}")
    return value


def _leaves(self: Recorder, op: str, operand: Any) -> tuple[list[XlaOp], bool]:
    """The arrays to reduce: one array, a tuple-shaped op's elements, or a list's elements;
    and whether the result is a tuple."""
    if isinstance(operand, (list, tuple)):
        return [self.check_operand(op, o) for o in operand], True
    operand = self.check_operand(op, operand)
    if operand.shape.is_tuple():
        return [self.get_tuple_element(operand, i)
                for i in range(len(operand.shape.tuple_shapes))], True
    return [operand], False


def _reducer_params(ops: list[XlaOp], computation: Any) -> list[Shape]:
    """`(acc..., x...)` for the operands together, or `(acc, x)` when the computation is binary
    and reduces each operand on its own (XLA's tuple all-reduce; one element type)."""
    scalars = [Shape.array(o.shape.element_type, ()) for o in ops]
    if len(ops) > 1 and _arity(computation) == 2:
        return scalars[:1] * 2
    return scalars + scalars


def _arity(computation: Any) -> int | None:
    if hasattr(computation, "program_shape"):
        return len(computation.program_shape()[0])
    try:
        params = inspect.signature(computation).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    return len(params)


class CollectiveMethods(Recorder):
    """The cross-replica collectives and the replica/partition ids."""

    def replica_id(self) -> XlaOp:
        """This replica's id: u32 in [0, num_replicas) (spec#replica_id)."""
        return self.emit("replica_id", [], {})

    def partition_id(self) -> XlaOp:
        """This partition's id: u32, always 0 (one partition per replica)."""
        return self.emit("partition_id", [], {})

    def all_reduce(self, operand: Any, computation: Any, replica_groups: Any = None,
                   channel_id: int | None = None) -> XlaOp:
        """Reduce `operand` (an array, or a tuple/list of arrays) element-wise across each replica
        group with `computation` `(acc..., x...) -> (acc...)` (spec#all_reduce)."""
        op = "all_reduce"
        ops, as_tuple = _leaves(self, op, operand)
        groups, channel = _groups(op, replica_groups), _channel(op, channel_id)
        require_arrays(op, [o.shape for o in ops], allow_many=True)
        comp = self.trace(op, computation, _reducer_params(ops, computation))
        emitted = self.emit(op, [ops], {"computation": comp, "replica_groups": groups,
                                         "channel_id": channel})
        return self.results(emitted, as_tuple)

    def cross_replica_sum(self, operand: Any, replica_groups: Any = None) -> XlaOp:
        """all_reduce with addition (spec#crossreplicasum); a tuple's elements are summed each
        on its own, whatever their shapes and types."""
        ops, as_tuple = _leaves(self, "cross_replica_sum", operand)
        require_arrays("cross_replica_sum", [o.shape for o in ops], allow_many=True)
        sums = [self.all_reduce(o, lambda a, c: a.builder.add(a, c), replica_groups) for o in ops]
        return self.tuple(sums) if as_tuple else sums[0]

    def reduce_scatter(self, operand: Any, computation: Any, scatter_dimension: int,
                       shard_count: int, replica_groups: Any = None,
                       channel_id: int | None = None) -> XlaOp:
        """all_reduce, then replica i of each group keeps block i of `scatter_dimension`
        (spec#reduce_scatter)."""
        op = "reduce_scatter"
        ops, as_tuple = _leaves(self, op, operand)
        attrs = {"scatter_dimension": args.integer(op, scatter_dimension, "scatter_dimension"),
                 "shard_count": args.integer(op, shard_count, "shard_count"),
                 "replica_groups": _groups(op, replica_groups), "channel_id": _channel(op, channel_id)}
        require_arrays(op, [o.shape for o in ops], allow_many=True)
        attrs["computation"] = self.trace(op, computation, _reducer_params(ops, computation))
        return self.results(self.emit(op, [ops], attrs), as_tuple)

    def all_gather(self, operand: XlaOp, all_gather_dim: int, shard_count: int,
                   replica_groups: Any = None, channel_id: int | None = None) -> XlaOp:
        """Concatenate the operands of each replica group along `all_gather_dim`, in group order
        (spec#all_gather)."""
        op = "all_gather"
        return self.emit(op, [operand], {
            "all_gather_dim": args.integer(op, all_gather_dim, "all_gather_dim"),
            "shard_count": args.integer(op, shard_count, "shard_count"),
            "replica_groups": _groups(op, replica_groups), "channel_id": _channel(op, channel_id)})

    def all_to_all(self, operand: XlaOp, split_dimension: int, concat_dimension: int,
                   split_count: int, replica_groups: Any = None,
                   channel_id: int | None = None) -> XlaOp:
        """Split `split_dimension` into `split_count` blocks, send block i to the group's replica i,
        concatenate what arrives along `concat_dimension` in group order (spec#alltoall)."""
        op = "all_to_all"
        return self.emit(op, [operand], {
            "split_dimension": args.integer(op, split_dimension, "split_dimension"),
            "concat_dimension": args.integer(op, concat_dimension, "concat_dimension"),
            "split_count": args.integer(op, split_count, "split_count"),
            "replica_groups": _groups(op, replica_groups), "channel_id": _channel(op, channel_id)})

    def collective_permute(self, operand: XlaOp, source_target_pairs: Any,
                           channel_id: int | None = None) -> XlaOp:
        """Send the operand from each pair's source replica to its target; replicas that receive
        nothing get zeros (spec#collectivepermute)."""
        op = "collective_permute"
        if isinstance(source_target_pairs, (str, bytes)) or not isinstance(
                source_target_pairs, (Sequence, np.ndarray)):
            raise ShapeError(op, [], f"source_target_pairs must be a list of (source, target) pairs, "
                             f"got {source_target_pairs!r}")
        pairs = []
        for pair in source_target_pairs:
            if isinstance(pair, (str, bytes)) or not isinstance(pair, (Sequence, np.ndarray)) \
                    or len(pair) != 2:
                raise ShapeError(op, [], f"source_target_pairs must be (source, target) pairs, got {pair!r}")
            pairs.append((args.integer(op, pair[0], "a source replica id"),
                          args.integer(op, pair[1], "a target replica id")))
        return self.emit(op, [operand], {"source_target_pairs": tuple(pairs),
                                          "channel_id": _channel(op, channel_id)})

    def ragged_all_to_all(self, input: XlaOp, input_offsets: XlaOp,  # noqa: A002 - XLA's name
                          send_sizes: XlaOp, output: XlaOp, output_offsets: XlaOp,
                          recv_sizes: XlaOp, replica_groups: Any = None,
                          channel_id: int | None = None) -> XlaOp:
        """Send rows `input[input_offsets[j]:input_offsets[j] + send_sizes[j]]` to member j of the
        replica group, which writes them into its copy of `output` at `output_offsets[j]` (the
        offsets as the receiver's output sees them); `recv_sizes[j]` is the count member j
        sends here. Offsets and sizes are s32/s64 of shape [group size] or [group size,
        updates per member]; rows nobody writes keep `output`'s values (seed: RaggedAllToAll)."""
        op = "ragged_all_to_all"
        return self.emit(op, [input, output, input_offsets, send_sizes, output_offsets, recv_sizes],
                         {"replica_groups": _groups(op, replica_groups),
                          "channel_id": _channel(op, channel_id)})

    def collective_broadcast(self, operand: XlaOp, replica_groups: Any = None,
                             channel_id: int | None = None) -> XlaOp:
        """Every replica of a group gets the operand of the group's first replica; replicas outside
        every group get zeros (spec#collective_broadcast)."""
        op = "collective_broadcast"
        return self.emit(op, [operand], {"replica_groups": _groups(op, replica_groups),
                                          "channel_id": _channel(op, channel_id)})
