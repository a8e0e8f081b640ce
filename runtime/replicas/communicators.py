"""The replicas' shared vocabulary: the `Communicator` protocol every transport implements
(threads: `threads.ThreadCommunicator`; MPI ranks: `mpi.MpiCommunicator`), the
`ReplicaContext` a running replica carries, the collectives' errors and group lookup.

Bounded waits: a replica waits at most `timeout` seconds (default
`collective_timeout()`: `COLLECTIVE_TIMEOUT` or `XLAMLIR_COLLECTIVE_TIMEOUT`) for
the rest of its group. When a wait times out or a replica raises, the
communicator is aborted: every replica still waiting, and every later
collective, fails at once with `CollectiveError`, so no replica hangs. (A
Python error cannot unwind native frames: a failed collective leaves zeros in
its result and the program runs to its end before the error is raised, as for
custom calls; a loop whose exit depends only on a failed collective's result
could therefore still spin.) Imports `dialect`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ...dialect.errors import ArgumentError, XlaError


def collective_timeout() -> float:
    """The default wait: the package's `COLLECTIVE_TIMEOUT` if set (users set it as
    `xlamlir.runtime.replicas.COLLECTIVE_TIMEOUT`), else `XLAMLIR_COLLECTIVE_TIMEOUT`, else 60 s.
    Both are read here, when replicas start, not at import."""
    # The package, looked up when called (not imported: it imports this module).
    setting = sys.modules[__package__].COLLECTIVE_TIMEOUT
    if setting is not None:
        return float(setting)
    text = os.environ.get("XLAMLIR_COLLECTIVE_TIMEOUT", "").strip()
    if not text:
        return 60.0
    try:
        return float(text)
    except ValueError:
        raise ArgumentError(f"XLAMLIR_COLLECTIVE_TIMEOUT must be a number of seconds, got "
                            f"{text!r}") from None


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


def located(groups: list[list[int]], me: int) -> tuple[list[int], int]:
    """`locate`, for the collectives every replica must be part of."""
    mine = locate(groups, me)
    if mine is None:
        raise CollectiveError(f"replica {me} is in none of the replica groups {groups}")
    return mine


class SingleReplica:
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
