"""Replicas: who runs a program, and the runtime side of the collectives.

A compiled program calls the builtin targets `xlamlir.collective.*` (see
`lowering/collective.py`) from native code; the functions here find the calling
replica (`current_replica`) and move the data with its communicator:

- `ThreadCommunicator`: the N replicas of `exe.execute_replicated(...)`, one thread
  each. The compiled entry point runs without the GIL (ctypes releases it), so
  replicas compute in parallel; a collective takes the GIL only to copy buffers,
  and waits for its peers on a condition variable.
- `distributed.MpiCommunicator`: one replica per MPI rank.

Bounded waits: a replica waits at most `timeout` seconds (default
`COLLECTIVE_TIMEOUT`, or `XLAMLIR_COLLECTIVE_TIMEOUT` in the environment) for
the rest of its group. When a wait times out or a replica raises, the
communicator is aborted: every replica still waiting, and every later
collective, fails at once with `CollectiveError`, so no replica hangs. (A
Python error cannot unwind native frames: a failed collective leaves zeros in
its result and the program runs to its end before the error is raised, as for
custom calls; a loop whose exit depends only on a failed collective's result
could therefore still spin.)

Imports `dialect`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..dialect.errors import ArgumentError, XlaError

COLLECTIVE_TIMEOUT = float(os.environ.get("XLAMLIR_COLLECTIVE_TIMEOUT", "60"))
TARGET_PREFIX = "xlamlir.collective."


class CollectiveError(XlaError, RuntimeError):
    """A collective could not complete: a peer failed, never came, or the program runs
    with a replica count its runtime does not provide."""


class CollectiveAborted(CollectiveError):
    """A collective given up because another replica failed first (not the root cause)."""


def locate(groups: Sequence[Sequence[int]], me: int) -> tuple[list[int], int] | None:
    """The caller's group and its position in it, or None when it is in none."""
    for group in groups:
        if me in group:
            return list(group), list(group).index(me)
    return None


class Communicator(Protocol):
    """How the replicas of one run exchange buffers. `groups` are the op's replica groups
    (resolved: never empty), `me` the caller's replica id. Arrays handed in may be views of
    the caller's buffers: implementations copy what they keep."""

    def gather(self, key: str, groups: list[list[int]], me: int,
               arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
        """Every member's arrays, in group order."""
        ...

    def exchange_blocks(self, key: str, groups: list[list[int]], me: int,
                        blocks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        """`blocks[m]` goes to member m of the caller's group; returns what each member sent
        to the caller, in group order."""
        ...

    def permute(self, key: str, pairs: Sequence[tuple[int, int]], me: int,
                array: np.ndarray) -> np.ndarray | None:
        """The array of the replica that has the caller as its target, or None."""
        ...

    def broadcast(self, key: str, groups: list[list[int]], me: int,
                  array: np.ndarray) -> np.ndarray | None:
        """The caller's group's first member's array; None for a replica in no group."""
        ...

    def abort(self, reason: str) -> None:
        ...


@dataclass(frozen=True)
class ReplicaContext:
    replica_id: int
    num_replicas: int
    communicator: Communicator


class _Slot:
    def __init__(self, size: int) -> None:
        self.values: list[Any] = [None] * size
        self.arrived = 0
        self.taken = 0


class ThreadCommunicator:
    """The rendezvous of N replicas running on threads of this process.

    The k-th execution of a collective on one replica meets the k-th execution of the
    same collective (same call site, or same channel id) on the others of its group.
    """

    def __init__(self, num_replicas: int, timeout: float | None = None) -> None:
        self.num_replicas = num_replicas
        self.timeout = COLLECTIVE_TIMEOUT if timeout is None else float(timeout)
        self._cond = threading.Condition()
        self._slots: dict[tuple[Any, ...], _Slot] = {}
        self._counts: dict[tuple[Any, ...], int] = {}
        self.aborted: str | None = None

    def abort(self, reason: str) -> None:
        with self._cond:
            if self.aborted is None:
                self.aborted = reason
            self._cond.notify_all()

    def _exchange(self, key: str, group: Sequence[int], position: int, value: Any) -> list[Any]:
        """Deposit `value`, wait for the whole group, return every member's value."""
        me = group[position]
        with self._cond:
            if self.aborted is not None:
                raise CollectiveAborted(f"replica {me}: collective ({key}) not run: {self.aborted}")
            site = (key, tuple(group))
            count = self._counts.get(site + (me,), 0)
            self._counts[site + (me,)] = count + 1
            slot_key = site + (count,)
            slot = self._slots.setdefault(slot_key, _Slot(len(group)))
            slot.values[position] = value
            slot.arrived += 1
            self._cond.notify_all()
            deadline = time.monotonic() + self.timeout
            while slot.arrived < len(group) and self.aborted is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = [group[i] for i, v in enumerate(slot.values) if v is None]
                    reason = (f"replica {me} waited {self.timeout:g} s in a collective ({key}) for "
                              f"replica(s) {missing} of its group {list(group)}, which never came "
                              f"(a replica failed, or the replicas ran different collectives)")
                    self.aborted = reason
                    self._cond.notify_all()
                    raise CollectiveError(reason)
                self._cond.wait(remaining)
            if slot.arrived < len(group):
                raise CollectiveAborted(f"replica {me}: collective ({key}) aborted: {self.aborted}")
            values = list(slot.values)
            slot.taken += 1
            if slot.taken == len(group):
                del self._slots[slot_key]
            return values

    def gather(self, key: str, groups: list[list[int]], me: int,
               arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
        group, position = located(groups, me)
        return self._exchange(key, group, position, [np.array(a) for a in arrays])

    def exchange_blocks(self, key: str, groups: list[list[int]], me: int,
                        blocks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        group, position = located(groups, me)
        sent = self._exchange(key, group, position, [[np.array(a) for a in b] for b in blocks])
        return [member[position] for member in sent]

    def permute(self, key: str, pairs: Sequence[tuple[int, int]], me: int,
                array: np.ndarray) -> np.ndarray | None:
        everyone = list(range(self.num_replicas))
        values = self._exchange(key, everyone, me, np.array(array))
        sources = [s for s, t in pairs if t == me]
        return values[sources[0]] if sources else None

    def broadcast(self, key: str, groups: list[list[int]], me: int,
                  array: np.ndarray) -> np.ndarray | None:
        mine = locate(groups, me)
        if mine is None:
            return None
        group, position = mine
        return self._exchange(key, group, position, np.array(array) if position == 0 else 0)[0]


def located(groups: list[list[int]], me: int) -> tuple[list[int], int]:
    """`locate`, for the collectives every replica must be part of."""
    mine = locate(groups, me)
    if mine is None:
        raise CollectiveError(f"replica {me} is in none of the replica groups {groups}")
    return mine


class _SingleReplica:
    """The one replica of a program compiled with num_replicas=1: every group is itself."""

    def gather(self, key: str, groups: list[list[int]], me: int,
               arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
        return [arrays]

    def exchange_blocks(self, key: str, groups: list[list[int]], me: int,
                        blocks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        return blocks

    def permute(self, key: str, pairs: Sequence[tuple[int, int]], me: int,
                array: np.ndarray) -> np.ndarray | None:
        return array if (0, 0) in {tuple(p) for p in pairs} else None

    def broadcast(self, key: str, groups: list[list[int]], me: int,
                  array: np.ndarray) -> np.ndarray | None:
        return array

    def abort(self, reason: str) -> None:
        pass


_SINGLE = ReplicaContext(0, 1, _SingleReplica())
_local = threading.local()


@contextlib.contextmanager
def running_as(context: ReplicaContext) -> Iterator[None]:
    """Calls of compiled programs on this thread run as `context`'s replica."""
    previous = getattr(_local, "context", None)
    _local.context = context
    try:
        yield
    finally:
        _local.context = previous


def current_replica(num_replicas: int) -> ReplicaContext:
    """The replica the calling thread runs: set by execute_replicated, else this MPI rank,
    else the only replica of a single-replica program."""
    context = getattr(_local, "context", None)
    if context is not None:
        return context
    from .. import distributed

    mpi = distributed.context(auto=num_replicas > 1)
    if mpi is not None:
        if mpi.num_replicas != num_replicas:
            raise CollectiveError(f"the program was compiled for {num_replicas} replica(s) but runs "
                                  f"on {mpi.num_replicas} MPI rank(s)")
        return mpi
    if num_replicas == 1:
        return _SINGLE
    raise CollectiveError(f"the program was compiled for {num_replicas} replicas: run it with "
                          f"exe.execute_replicated([...]) (one argument list per replica), or one "
                          f"rank per replica under mpiexec after xm.distributed.initialize()")


# -- the builtin targets the compiled code calls ---------------------------------------------------

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


# -- execute_replicated ----------------------------------------------------------------------------

def execute_replicated(self: Any, per_replica_args: Sequence[Sequence[Any]],
                       timeout: float | None = None) -> list[Any]:
    """Run the executable's `num_replicas` replicas concurrently, one thread each, replica i
    on `per_replica_args[i]`; the results, one per replica. A collective waits at most
    `timeout` seconds (default `COLLECTIVE_TIMEOUT`) for its peers; if any replica fails,
    every replica stops waiting and the first replica's error is raised."""
    n = self.num_replicas
    if isinstance(per_replica_args, (str, bytes, np.ndarray)) or not isinstance(
            per_replica_args, Sequence):
        raise ArgumentError(f"execute_replicated takes a list of {n} argument list(s), one per "
                            f"replica, got {type(per_replica_args).__name__}")
    if len(per_replica_args) != n:
        raise ArgumentError(f"{self.name} runs {n} replica(s): expected {n} argument list(s), "
                            f"got {len(per_replica_args)}")
    arg_lists = []
    for i, args in enumerate(per_replica_args):
        if isinstance(args, (str, bytes, np.ndarray)) or not isinstance(args, Sequence):
            raise ArgumentError(f"replica {i}: its arguments must be a list or tuple, got "
                                f"{type(args).__name__}")
        try:
            self._arrays(list(args))  # every argument checked before any replica starts
        except ArgumentError as e:
            raise ArgumentError(f"replica {i}: {e}") from None
        arg_lists.append(tuple(args))
    communicator = ThreadCommunicator(n, timeout)
    results: list[Any] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def run(replica: int) -> None:
        try:
            with running_as(ReplicaContext(replica, n, communicator)):
                results[replica] = self(*arg_lists[replica])
        except BaseException as e:  # noqa: BLE001 - re-raised on the calling thread
            errors[replica] = e
            communicator.abort(f"replica {replica} raised {type(e).__name__}: {e}")

    if n == 1:
        run(0)
    else:
        threads = [threading.Thread(target=run, args=(r,), name=f"{self.name}-replica-{r}", daemon=True)
                   for r in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    failed = [(r, e) for r, e in enumerate(errors) if e is not None]
    if failed:
        # The root cause, not the replicas that only saw the abort.
        first = next(((r, e) for r, e in failed if not isinstance(e, CollectiveAborted)), failed[0])
        replica, error = first
        error.add_note(f"raised by replica {replica} of {n}")
        raise error
    return results


# -- compile-time checks ---------------------------------------------------------------------------

def check_collectives(module: Any, num_replicas: int) -> None:
    """The replica-group rules that need the replica count (ShapeError), and the count
    recorded on the module for the lowering (`xhlo.num_replicas`, when above 1)."""
    from mlir import ir

    from ..dialect.attributes import attribute_values
    from ..dialect.ops_collective import GROUPED_OPS, check_replica_groups
    from ..dialect.registry import DIALECT, lookup
    from ..lowering.collective import NUM_REPLICAS_ATTR

    def visit(op: Any) -> None:
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    name = inner.operation.name.removeprefix(DIALECT + ".")
                    if name in GROUPED_OPS:
                        check_replica_groups(name, attribute_values(lookup(name), inner.operation),
                                             num_replicas)
                    visit(inner.operation)

    visit(module.operation)
    if num_replicas > 1:
        module.operation.attributes[NUM_REPLICAS_ATTR] = ir.IntegerAttr.get(
            ir.IntegerType.get_signless(64), num_replicas)

