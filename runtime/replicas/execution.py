"""Who runs a program: the replica of the calling thread (`current_replica`), set by
`execute_replicated` (threads), else this process's MPI rank; and the compile-time
checks that need the replica count. Imports `dialect`, `lowering`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from mlir import ir

from ...dialect.attributes import attribute_values
from ...dialect.errors import ArgumentError
from ...dialect.ops_collective import GROUPED_OPS, check_replica_groups
from ...dialect.registry import DIALECT, lookup
from ...lowering.ops.collective import NUM_REPLICAS_ATTR
from . import mpi
from .communicators import CollectiveAborted, CollectiveError, ReplicaContext, SingleReplica
from .threads import ThreadCommunicator

_SINGLE = ReplicaContext(0, 1, SingleReplica())
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
    rank = mpi.context(auto=num_replicas > 1)
    if rank is not None:
        if rank.num_replicas != num_replicas:
            raise CollectiveError(f"the program was compiled for {num_replicas} replica(s) but runs "
                                  f"on {rank.num_replicas} MPI rank(s)")
        return rank
    if num_replicas == 1:
        return _SINGLE
    raise CollectiveError(f"the program was compiled for {num_replicas} replicas: run it with "
                          f"exe.execute_replicated([...]) (one argument list per replica), or one "
                          f"rank per replica under mpiexec after xm.distributed.initialize()")


# -- execute_replicated ----------------------------------------------------------------------------

def execute_replicated(self: Any, per_replica_args: Sequence[Sequence[Any]],
                       timeout: float | None = None) -> list[Any]:
    """Run the executable's `num_replicas` replicas concurrently, one thread each, replica i
    on `per_replica_args[i]`; the results, one per replica. A collective waits at most
    `timeout` seconds (default `collective_timeout()`) for its peers; if any replica fails,
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
