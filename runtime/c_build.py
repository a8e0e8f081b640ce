"""Building the library's C (the call path, runtime/fastcall.py; the thread pool,
runtime/task_pool.py) with the system's C compiler, once per cache directory; and, by
`load_or_build`, any other build kept there (the runtime library, runtime/shared_runtime.py).

A build goes into the persistent compile cache's `fastcall/` folder (runtime/disk_cache.py),
named by the caller with a hash of everything it depends on (`key`), so a later process
only loads it; with the cache off, or not writable, into a temporary directory, built once
per process. Concurrent processes each build under a temporary name and rename into place:
the last rename wins, a reader never sees half a file. Imports `runtime.disk_cache`.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .disk_cache import FASTCALL_FOLDER, cache_dir

_TIMEOUT_S = 120
T = TypeVar("T")


_OFF = frozenset({"0", "off", "false", "no", "none"})


def allowed(switch: str) -> bool:
    """Whether the environment variable `switch` lets a build be used (unset: yes)."""
    return os.environ.get(switch, "").strip().lower() not in _OFF


def compiler() -> list[str]:
    """`$CC` (default `cc`), split like a shell command."""
    return shlex.split(os.environ.get("CC", "")) or ["cc"]


def require_compiler(command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        raise OSError(f"no C compiler {command[0]!r} on PATH")


def key(source: str, command: list[str], *parts: str) -> str:
    """A name for a build of `source` by `command`, also depending on `parts`."""
    digest = hashlib.sha256(source.encode())
    for part in (" ".join(command), *parts):
        digest.update(b"\0" + str(part).encode())
    return digest.hexdigest()[:24]


def _cache_folder(target: Callable[[Path], Path]) -> Path | None:
    """The cache's C folder, if the cache is on and the build is there or can be made
    there (a read-only cache still serves a build made before)."""
    base = cache_dir()
    if base is None:
        return None
    directory = Path(base, FASTCALL_FOLDER)
    if target(directory).is_file():
        return directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory if os.access(directory, os.W_OK) else None


def _temporary_folder() -> Path:
    temporary = tempfile.mkdtemp(prefix="xlamlir-c-")
    atexit.register(shutil.rmtree, temporary, True)
    return Path(temporary)


def load_or_build(target: Callable[[Path], Path], build: Callable[[Path, Path], None],
                  load: Callable[[Path], T], load_errors: tuple[type[BaseException], ...]) -> T:
    """`load` the file `target(folder)` of the cache's C folder, built there by
    `build(folder, path)` when missing or damaged (`load` raised one of `load_errors`:
    built again, once); in a temporary folder when the cache cannot hold it."""
    directory = _cache_folder(target)
    if directory is None:
        directory = _temporary_folder()
        path = target(directory)
        build(directory, path)
        return load(path)
    path = target(directory)
    if not path.is_file():
        build(directory, path)
    try:
        return load(path)
    except load_errors:
        path.unlink(missing_ok=True)
        build(directory, path)
        return load(path)


def compile_shared(command: list[str], directory: Path, path: Path, source: str, flags: list[str],
                   libraries: list[str]) -> None:
    """Compile `source` into the shared library `path` (`command` + `flags`, linked with
    `libraries`), under a temporary name in `directory` renamed into place."""
    fd, partial = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=directory)
    os.close(fd)
    source_path = partial[:-3] + ".c"
    try:
        Path(source_path).write_text(source)
        full = [*command, "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-Wall", *flags,
                source_path, "-o", partial, *libraries]
        proc = subprocess.run(full, capture_output=True, text=True, timeout=_TIMEOUT_S)
        if proc.returncode != 0:
            raise OSError(f"{' '.join(full)} failed: {(proc.stderr or proc.stdout).strip()}")
        os.replace(partial, path)
    finally:
        for leftover in (partial, source_path):
            if os.path.exists(leftover):
                os.unlink(leftover)
