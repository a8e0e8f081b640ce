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
from .communicators import ReplicaContext
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

    targets: dict[str, Callable[..., None]] = {
        "replica_id": replica_id, "partition_id": partition_id, "permute": guarded(permute),
        "gather": guarded(gather), "scatter_blocks": guarded(scatter_blocks),
        "all_gather": guarded(all_gather), "all_to_all": guarded(all_to_all),
        "broadcast": guarded(broadcast),
    }
    return {TARGET_PREFIX + name: fn for name, fn in targets.items()}
