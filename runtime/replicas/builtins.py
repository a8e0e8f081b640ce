"""The builtin custom-call targets `xlamlir.collective.*` the compiled collectives call
(see `lowering/ops/collective.py`): each finds the calling replica and moves the data
with its communicator. Imports `dialect`, `lowering`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import numpy as np

from ...lowering.ops.collective import TARGET_PREFIX
from .communicators import CollectiveError, ReplicaContext, located
from .execution import current_replica


@functools.lru_cache(maxsize=1024)
def _parse(opaque: str) -> dict[str, Any]:
    return json.loads(opaque)


def _blocks(array: np.ndarray, count: int, axis: int) -> list[np.ndarray]:
    size = array.shape[axis] // count
    return [np.take(array, range(i * size, (i + 1) * size), axis=axis) for i in range(count)]


def _stack(outs: list[np.ndarray], members: list[list[np.ndarray]]) -> None:
    """Output leaf i, dimension 0 member m: member m's leaf i (the compiled code reduces)."""
    for i, out in enumerate(outs):
        for m, arrays in enumerate(members):
            out[m] = arrays[i]


def collective_builtins(num_replicas: int) -> dict[str, Callable[..., None]]:
    """The builtin custom-call targets of the collectives, for a program of `num_replicas`."""

    def guarded(fn: Callable[..., None]) -> Callable[..., None]:
        def run(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
            spec = _parse(opaque)
            context = current_replica(num_replicas)
            groups = spec.get("groups") or [list(range(context.num_replicas))]
            try:
                fn(context, spec, groups, ins, outs)
            except BaseException as e:
                context.communicator.abort(f"replica {context.replica_id} failed: {e}")
                raise

        return run

    def replica_id(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        outs[0][...] = current_replica(num_replicas).replica_id

    def partition_id(ins: list[np.ndarray], outs: list[np.ndarray], opaque: str) -> None:
        current_replica(num_replicas)  # the same checks as every collective
        outs[0][...] = 0

    def gather(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
               ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        _stack(outs, ctx.communicator.gather(spec["key"], groups, ctx.replica_id, ins))

    def scatter_blocks(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                       ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        count = len(groups[0])
        split = [_blocks(a, count, spec["dimension"]) for a in ins]
        blocks = [[leaf[m] for leaf in split] for m in range(count)]
        _stack(outs, ctx.communicator.exchange_blocks(spec["key"], groups, ctx.replica_id, blocks))

    def all_gather(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                   ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        members = ctx.communicator.gather(spec["key"], groups, ctx.replica_id, ins)
        outs[0][...] = np.concatenate([m[0] for m in members], axis=spec["dimension"])

    def all_to_all(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                   ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        blocks = [[b] for b in _blocks(ins[0], len(groups[0]), spec["split_dimension"])]
        received = ctx.communicator.exchange_blocks(spec["key"], groups, ctx.replica_id, blocks)
        outs[0][...] = np.concatenate([r[0] for r in received], axis=spec["concat_dimension"])

    def broadcast(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                  ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        got = ctx.communicator.broadcast(spec["key"], groups, ctx.replica_id, ins[0])
        outs[0][...] = 0 if got is None else got

    def permute(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        pairs = [(int(s), int(t)) for s, t in spec["pairs"]]
        got = ctx.communicator.permute(spec["key"], pairs, ctx.replica_id, ins[0])
        outs[0][...] = 0 if got is None else got

    def ragged_all_to_all(ctx: ReplicaContext, spec: dict[str, Any], groups: list[list[int]],
                          ins: list[np.ndarray], outs: list[np.ndarray]) -> None:
        data, output, *metadata = ins
        outs[0][...] = _ragged_all_to_all(ctx, spec["key"], groups, data, output, *metadata)

    targets: dict[str, Callable[..., None]] = {
        "replica_id": replica_id, "partition_id": partition_id, "permute": guarded(permute),
        "gather": guarded(gather), "scatter_blocks": guarded(scatter_blocks),
        "all_gather": guarded(all_gather), "all_to_all": guarded(all_to_all),
        "broadcast": guarded(broadcast), "ragged_all_to_all": guarded(ragged_all_to_all),
    }
    return {TARGET_PREFIX + name: fn for name, fn in targets.items()}


def _ragged_all_to_all(ctx: ReplicaContext, key: str, groups: list[list[int]], data: np.ndarray,
                       output: np.ndarray, input_offsets: np.ndarray, send_sizes: np.ndarray,
                       output_offsets: np.ndarray, recv_sizes: np.ndarray) -> np.ndarray:
    """ragged_all_to_all in two exchanges that move same-shape arrays only (what an MPI
    communicator needs): every member's send_sizes and output_offsets, then to each member
    one block [updates, longest send of the group, row...] holding its rows, zero-padded.
    A bad offset or size raises on the replica that gave or receives it."""
    me = ctx.replica_id
    group, position = located(groups, me)
    rank = np.ndim(input_offsets)  # 1: [group size], 2: [group size, updates]
    offsets, sizes, destinations, expected = (
        np.asarray(a, np.int64).reshape(len(group), -1)
        for a in (input_offsets, send_sizes, output_offsets, recv_sizes))
    _check_slices(me, "input", data.shape[0], offsets, sizes, rank,
                  ("input_offsets", "send_sizes"))
    members = ctx.communicator.gather(key + " sizes", groups, me, [sizes, destinations])
    longest = max(int(m[0].max(initial=0)) for m in members)
    updates = sizes.shape[1]
    blocks = []
    for j in range(len(group)):
        block = np.zeros((updates, longest) + data.shape[1:], data.dtype)
        for u in range(updates):
            start, count = offsets[j, u], sizes[j, u]
            block[u, :count] = data[start:start + count]
        blocks.append([block])
    received = ctx.communicator.exchange_blocks(key, groups, me, blocks)
    result = np.array(output)
    for j, ((their_sizes, their_offsets), (block,)) in enumerate(zip(members, received)):
        for u in np.flatnonzero(their_sizes[position] != expected[j]):
            raise CollectiveError(
                f"ragged_all_to_all: replica {me} expects recv_sizes{_index(j, u, rank)} = "
                f"{expected[j, u]} rows from replica {group[j]}, which sends "
                f"{their_sizes[position, u]} (its send_sizes{_index(position, u, rank)})")
        names = (f"replica {group[j]}'s output_offsets", "send_sizes")
        _check_slices(me, "output", output.shape[0], their_offsets, their_sizes, rank, names,
                      only_row=position)
        for u in range(updates):
            start, count = their_offsets[position, u], their_sizes[position, u]
            result[start:start + count] = block[u, :count]
    return result


def _index(j: int, u: int, rank: int) -> list[int]:
    """Entry (j, u) of a [group size, updates] view, as an index of the array's own rank."""
    return [int(j), int(u)] if rank == 2 else [int(j)]


def _check_slices(me: int, what: str, rows: int, starts: np.ndarray, counts: np.ndarray,
                  rank: int, names: tuple[str, str], only_row: int | None = None) -> None:
    """Every slice [start, start + count) of the [group size, updates] views (of row
    `only_row` alone if given) non-negative and inside the `rows` of `what`."""
    bad = (starts < 0) | (counts < 0) | (starts + counts > rows)
    if only_row is not None:
        bad[np.arange(len(bad)) != only_row] = False
    if bad.any():
        j, u = np.argwhere(bad)[0]
        index = _index(j, u, rank)
        raise CollectiveError(
            f"ragged_all_to_all on replica {me}: {names[0]}{index} = {starts[j, u]} and "
            f"{names[1]}{index} = {counts[j, u]} select rows outside the {what}'s {rows} rows")
