"""Settings a user may change at run time: module-level values and environment variables
are read when they are used, not bound when xlamlir is imported. (IO_TIMEOUT: test_io.py;
CACHE_SIZE: test_memory.py; schedules.STRICT: test_schedules.py.)"""

from __future__ import annotations

import time

import numpy as np
import pytest

import xlamlir as xm
from xlamlir import distributed
from xlamlir.runtime import replicas
from xlamlir.runtime.replicas import CollectiveError

F32 = xm.Shape.array(xm.F32, (2,))


def _mismatched_replicas() -> xm.Executable:
    """Replica 0 runs an all_reduce that replica 1 never reaches: replica 0 waits out the timeout."""
    b = xm.XlaBuilder("never_met")
    x = b.parameter(0, F32)
    is_zero = b.eq(b.replica_id(), b.constant(np.uint32(0)))
    comp = b.build(b.conditional(is_zero, [lambda v: v.builder.cross_replica_sum(v), lambda v: v],
                                 [x, x]))
    return xm.compile(comp, num_replicas=2)


def test_collective_timeout_environment_read_when_replicas_start(monkeypatch) -> None:
    exe = _mismatched_replicas()
    monkeypatch.setenv("XLAMLIR_COLLECTIVE_TIMEOUT", "0.3")  # after import: still obeyed
    started = time.monotonic()
    with pytest.raises(CollectiveError, match="never came"):
        exe.execute_replicated([[np.float32([1, 2])], [np.float32([3, 4])]])
    assert time.monotonic() - started < 30  # not the 60 s default


def test_collective_timeout_attribute_wins_over_environment(monkeypatch) -> None:
    monkeypatch.setenv("XLAMLIR_COLLECTIVE_TIMEOUT", "5")
    assert replicas.ThreadCommunicator(2).timeout == 5.0
    assert distributed.MpiCommunicator(comm=None).timeout == 5.0
    monkeypatch.setattr(replicas, "COLLECTIVE_TIMEOUT", 0.25)
    # Both communicators (threads and MPI) see the value set after import.
    assert replicas.ThreadCommunicator(2).timeout == 0.25
    assert distributed.MpiCommunicator(comm=None).timeout == 0.25
    assert replicas.ThreadCommunicator(2, timeout=7).timeout == 7.0
    monkeypatch.setattr(replicas, "COLLECTIVE_TIMEOUT", None)
    monkeypatch.delenv("XLAMLIR_COLLECTIVE_TIMEOUT")
    assert replicas.collective_timeout() == 60.0


def test_bad_collective_timeout_environment_is_an_argument_error(monkeypatch) -> None:
    monkeypatch.setenv("XLAMLIR_COLLECTIVE_TIMEOUT", "soon")
    with pytest.raises(xm.ArgumentError, match="XLAMLIR_COLLECTIVE_TIMEOUT.*'soon'"):
        replicas.collective_timeout()
