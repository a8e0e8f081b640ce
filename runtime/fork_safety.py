"""Executables in a child process forked after the parent ran parallel loops.

Parallel loops run on the async runtime's thread pool (lowering/passes/parallel_tasks.py).
`fork()` copies none of its threads: in the child, the first parallel loop submitted work
that nobody ran and waited forever (`multiprocessing`'s default start method on Linux is
fork). So, in a child forked after the parent loaded the runtime:
- a compile lowers every loop to run on the calling thread (`Pipeline.sequential()`);
- an executable of the parent whose code dispatches parallel loops runs, from its first
  call in the child, a copy compiled sequentially from its own hlo stage (once, lazily).
Results are the same bits: how iterations are split never changes a result.
Imports nothing of ours.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

#: The dispatcher every parallel loop calls (parallel_tasks.PARALLEL_FOR).
DISPATCHER = "xlamlir_parallel_for"

_loaded_in: list[int] = []  # the pid that loaded the thread pool's library, once
_pool_gone = False
_watched: weakref.WeakKeyDictionary[Any, Callable[[], Any]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def pool_loaded() -> None:
    """The async runtime's library is loaded in this process (runtime/compiler.py)."""
    if not _loaded_in:
        _loaded_in.append(os.getpid())


def pool_usable() -> bool:
    """False in a child forked after its parent loaded the thread pool."""
    return not _pool_gone


def watch(executable: Any, compile_sequential: Callable[[], Any]) -> None:
    """Remember how to compile `executable` without parallel loops, should this process
    fork; only executables whose code dispatches parallel loops need it (the compiler
    sets `dispatches_parallel_loops`)."""
    if getattr(executable, "dispatches_parallel_loops", False):
        with _lock:
            _watched[executable] = compile_sequential


def _after_fork_in_child() -> None:
    global _pool_gone
    if not _loaded_in:
        return  # the parent never loaded the pool: the child's own starts fresh
    _pool_gone = True
    for executable, compile_sequential in list(_watched.items()):
        executable._run_sequentially(compile_sequential)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
