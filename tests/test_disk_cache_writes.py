"""The disk cache's entries are linked and written in the background
(runtime/cache_writer.py): what a compile, a load, `clear` and the process's exit may
rely on. The link is slowed down here so that a write is surely still pending when the
test looks.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import test_disk_cache

import xlamlir as xm
from xlamlir.runtime import cache_writer, disk_cache
from xlamlir.runtime.cached_library import linker
from xlamlir.runtime.compiler import clear_cache

ROOT = Path(__file__).resolve().parents[1]
SLOW_LINK_S = 0.5
cache = test_disk_cache.cache  # the fixture: a fresh cache directory, its writes flushed


@pytest.fixture
def slow_link(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Each link waits SLOW_LINK_S; the event is set when a link started."""
    started = threading.Event()
    real = disk_cache.link_library

    def link(*args: object) -> bytes:
        started.set()
        time.sleep(SLOW_LINK_S)
        return real(*args)

    monkeypatch.setattr(disk_cache, "link_library", link)
    return started


def program(offset: float = 1.0) -> xm.XlaComputation:
    b = xm.XlaBuilder("shifted")
    b.add(b.parameter(0, xm.Shape.array(xm.F32, (7,))), b.constant(np.float32(offset)))
    return b.build()


X = np.arange(7, dtype=np.float32)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("*" + disk_cache.SUFFIX))


def test_a_compile_returns_before_its_entry_is_written(cache: Path, slow_link: threading.Event) -> None:
    exe = xm.compile(program())
    np.testing.assert_array_equal(exe(X), X + 1)
    assert exe.compile_stats["disk_cache"] == "miss"
    assert exe.compile_stats["disk_cache_store_s"] < SLOW_LINK_S
    assert not entries(cache) and "disk_cache_write_s" not in exe.compile_stats
    disk_cache.flush()
    assert len(entries(cache)) == 1
    assert exe.compile_stats["disk_cache_write_s"] >= SLOW_LINK_S
    assert "disk_cache_notes" not in exe.compile_stats


def test_a_load_waits_for_the_write_of_its_key(cache: Path, slow_link: threading.Event) -> None:
    xm.compile(program())
    clear_cache()
    again = xm.compile(program())
    assert again.compile_stats["disk_cache"] == "hit"
    np.testing.assert_array_equal(again(X), X + 1)


def test_clear_counts_the_entries_still_being_written(cache: Path, slow_link: threading.Event) -> None:
    xm.compile(program(1.0))
    xm.compile(program(2.0))
    assert disk_cache.clear() == 2 and not entries(cache)


def test_a_failed_write_is_a_note_once_flushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               slow_link: threading.Event) -> None:
    if linker() is None:
        pytest.skip("no linker (ld or ld.lld) on PATH")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("XLAMLIR_CACHE_DIR", str(blocker / "cache"))
    clear_cache()
    exe = xm.compile(program())
    disk_cache.flush()
    assert "not stored" in " ".join(exe.compile_stats["disk_cache_notes"])
    clear_cache()


def test_the_process_writes_its_entries_before_it_exits(cache: Path) -> None:
    # The child's link takes SLOW_LINK_S; it exits right after compiling.
    script = f"""
        import time
        import numpy as np
        import xlamlir as xm
        from xlamlir.runtime import disk_cache
        real = disk_cache.link_library
        def slow(*args):
            time.sleep({SLOW_LINK_S})
            return real(*args)
        disk_cache.link_library = slow
        b = xm.XlaBuilder("shifted")
        b.add(b.parameter(0, xm.Shape.array(xm.F32, (7,))), b.constant(np.float32(1.0)))
        print(xm.compile(b.build()).compile_stats["disk_cache"])
    """
    env = {**os.environ, "XLAMLIR_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT.parent)}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["miss"]
    assert len(entries(cache)) == 1
    exe = xm.compile(program())
    if exe.compile_stats["disk_cache"] != "hit":  # a library file saved meanwhile changes the key
        pytest.skip(f"the disk cache said {exe.compile_stats['disk_cache']}")
    np.testing.assert_array_equal(exe(X), X + 1)


def test_a_forked_child_does_not_inherit_pending_writes() -> None:
    # A parent's pending write would make the child's flush wait forever (no writer thread).
    done = threading.Event()
    cache_writer.submit("parent-key", done.wait)
    try:
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a child that hangs dies (exit code -14), never the test run
            cache_writer.flush()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
    finally:
        done.set()
        cache_writer.flush()
    assert os.waitstatus_to_exitcode(status) == 0
