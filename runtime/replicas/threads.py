"""The communicator of `exe.execute_replicated(...)`: N replicas, one thread each.

The compiled entry point runs without the GIL (ctypes releases it), so replicas
compute in parallel; a collective takes the GIL only to copy buffers, and waits
for its peers on a condition variable. Imports `dialect`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .communicators import CollectiveAborted, CollectiveError, collective_timeout, locate, located


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
        self.timeout = collective_timeout() if timeout is None else float(timeout)
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
