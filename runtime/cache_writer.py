"""Write-behind for the disk cache: entries are linked and written in a background thread.

Storing an entry links the JIT's object file into a shared library (`ld`, a subprocess),
compresses, writes and fsyncs it: 5-10 ms (more on a busy machine) that a compile
spent after its program was ready. The compile now hands that work to one writer thread
and returns. Guarantees:

- the process writes its entries before it exits (the writer is not a daemon thread:
  the interpreter waits for it), unless killed; an entry is renamed into place whole
  (runtime/disk_cache.py), so another process sees all of it or nothing;
- a load of a key this process is still writing waits for that write (the same program
  compiled again after `clear_cache()` is a hit, as before);
- `flush()` waits for every pending write (tests; before deleting entries).

A child forked while writes were pending does not write them (the parent does).
Imports nothing of ours.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable

_cond = threading.Condition()
_queue: collections.deque[tuple[str, Callable[[], None]]] = collections.deque()
_pending: collections.Counter[str] = collections.Counter()  # keys queued or being written
_writer_running = False


def submit(key: str, write: Callable[[], None]) -> None:
    """Run `write` (which must not raise) in the writer thread, after those before it."""
    global _writer_running
    with _cond:
        _queue.append((key, write))
        _pending[key] += 1
        start = not _writer_running
        _writer_running = True
    if start:
        try:
            threading.Thread(target=_write_queued, name="xlamlir-cache-writer").start()
        except RuntimeError:  # no new threads (interpreter shutdown): write here
            _write_queued()


def _write_queued() -> None:
    global _writer_running
    while True:
        with _cond:
            if not _queue:
                _writer_running = False
                return
            key, write = _queue.popleft()
        try:
            write()
        except Exception:  # noqa: BLE001, S110 - a write reports its own failures; the writer goes on
            pass
        finally:
            with _cond:
                _pending[key] -= 1
                if not _pending[key]:
                    del _pending[key]
                _cond.notify_all()


def flush() -> None:
    """Wait until every entry this process stored so far is written (or failed)."""
    with _cond:
        _cond.wait_for(lambda: not _pending)


def wait_for(key: str) -> None:
    """Wait until no write of `key` is pending."""
    with _cond:
        _cond.wait_for(lambda: key not in _pending)


def locked() -> threading.Condition:
    """The writer's lock, for updating what a write reports into (compile_stats)."""
    return _cond


def _forget_in_child() -> None:
    global _cond, _writer_running
    _cond = threading.Condition()
    _queue.clear()
    _pending.clear()
    _writer_running = False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
