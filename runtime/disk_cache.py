"""The persistent compile cache: a process compiling a program that any process compiled
before, with the same pipeline for the same CPU, loads the machine code from disk.

Where: `$XLAMLIR_CACHE_DIR`, by default `$XDG_CACHE_HOME/xlamlir` (`~/.cache/xlamlir`);
"", "0" or "off" turn it off. At most `$XLAMLIR_CACHE_MAX_MB` megabytes (default 512):
after each write the least recently used entries go (a hit refreshes an entry's mtime).

An entry is one file `<key>.xlc`: a header (magic, format, SHA-256 of the rest), then the
metadata as JSON (the key again, the program shape, the custom-call records, the first
compile's statistics), the shared library of the JIT's machine code
(runtime/cached_library.py) and the stage texts, zlib-compressed. It is written under a
temporary name, fsynced and renamed into place, so a reader sees a whole entry or none;
one that does not check out (truncated, garbled, another key) is deleted and the program
compiled and written again. A compile hands the link and the write to a background
thread and returns (runtime/cache_writer.py): `flush()` waits for them, the process
does before it exits, and a load of a key being written waits for it. The folder
`fastcall/` holds the library's own builds (the call path, runtime/fastcall.py, and the thread
pool, runtime/task_pool.py, in C; the runtime library, runtime/shared_runtime.py);
`clear()` removes it.

The key hashes everything the machine code depends on: the module text, the pipeline
(textual passes by their text, the library's own Python passes by module:qualname), the
target CPU and this machine's CPU (model and feature flags: the JIT's wrappers are compiled
for it), the library (version and a hash of its source files, taken at import), the
MLIR/LLVM wheels, num_replicas, dynamic_strides, the entry name, the JIT's -O level and
$XLAMLIR_RUNTIME_LIBRARY (runtime/shared_runtime.py).
Not cached: pipelines with other Python passes (a lambda or closure has no stable name),
compiles asking for per-pass dumps, pass timings or stage locations, and machines other
than Linux x86-64 or without a linker. Imports `dialect`.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import struct
import sys
import tempfile
import time
import types
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dialect.errors import ArgumentError, CompileError
from ..dialect.shape import Shape
from ..lowering.stage_texts import StageTexts
from . import cache_writer
from .cached_library import LoadedLibrary, link_library, linker, open_library
from .split_jit import fill_slots, links_of, object_files

ENV_DIR = "XLAMLIR_CACHE_DIR"
ENV_MAX_MB = "XLAMLIR_CACHE_MAX_MB"
DEFAULT_MAX_MB = 512
#: Bumped whenever the entry layout or what an entry means changes.
FORMAT = 4  # 3: "links" (a program in two objects, runtime/split_jit.py); 4: "runtime_library"
SUFFIX = ".xlc"
_OFF = frozenset({"", "0", "off", "false", "no", "none"})
# Compiles asking for what only a real compile produces.
_RECOMPILE_ENV = ("XLAMLIR_DUMP_PASSES", "XLAMLIR_PASS_TIMING", "XLAMLIR_STAGE_LOCATIONS")
_MAGIC = b"xlamlir-cache\0\0\0"
_HEADER = struct.Struct("<16sII32s")  # magic, format, metadata length, SHA-256 of the rest
_STALE_S = 3600  # a temporary file this old was left by a process that died
#: Where the library's own builds go (runtime/c_build.py): the call path's module
#: (runtime/fastcall.py), the thread pool (runtime/task_pool.py) and the runtime library
#: (runtime/shared_runtime.py), one file per build key.
FASTCALL_FOLDER = "fastcall"
_PACKAGE = __name__.split(".")[0]
_ROOT = Path(__file__).resolve().parents[1]


def source_digest(root: str | os.PathLike[str]) -> str:
    """SHA-256 over the Python files of the package at `root` (its own files and those of
    its sub-packages, by relative path): any edit of the library changes every key."""
    digest = hashlib.sha256()
    root = Path(root)
    for directory, subdirs, files in os.walk(root):
        here = Path(directory)
        subdirs[:] = sorted(d for d in subdirs if (here / d / "__init__.py").is_file())
        for name in sorted(f for f in files if f.endswith(".py")):
            digest.update(str((here / name).relative_to(root)).encode() + b"\0")
            digest.update((here / name).read_bytes() + b"\0")
    return digest.hexdigest()


def _source_identity() -> str | None:
    try:
        return source_digest(_ROOT)
    except OSError:
        return None


# Taken at import: the sources of the code this process runs, not of a later edit.
_SOURCES = _source_identity()
_identities: dict[str, str | None] = {}


def _toolchain_identity() -> str:
    """The MLIR/LLVM wheels: their distributions' names (with versions) and the size and
    mtime of the extension holding the JIT; Python's and numpy's versions (the Python
    passes run on them)."""
    import numpy as np
    from mlir import _mlir_libs
    from mlir._mlir_libs import _mlirExecutionEngine

    # Not through mlir.__path__: a namespace package's path is recomputed (milliseconds).
    libs = os.path.dirname(os.path.abspath(_mlir_libs.__file__))
    site = os.path.dirname(os.path.dirname(libs))
    parts = sorted(n for n in os.listdir(site) if n.endswith(".dist-info")
                   and n.lower().startswith(("xtc_mlir", "xtc_llvm", "mlir", "llvm")))
    for path in (os.path.join(libs, "libMLIRPythonCAPI.so"), _mlirExecutionEngine.__file__):
        if os.path.exists(path):
            st = os.stat(path)
            parts.append(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}")
    parts += [f"python:{sys.version}", f"numpy:{np.__version__}"]
    return "|".join(parts)


def _host_identity() -> str | None:
    """This machine's CPU (model and feature flags of the first processor), None if unknown."""
    wanted = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags")
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                name, _, value = line.partition(":")
                if name.strip() in wanted:
                    fields[name.strip()] = value.strip()
    except OSError:
        return None
    if "flags" not in fields:
        return None
    return platform.machine() + "\n" + "\n".join(f"{k}={fields[k]}" for k in sorted(fields))


def _identity(name: str) -> str | None:
    """"host" or "toolchain", found once per process; None if unknown."""
    if name not in _identities:
        try:
            _identities[name] = _host_identity() if name == "host" else _toolchain_identity()
        except (OSError, ImportError, AttributeError):
            _identities[name] = None
    return _identities[name]


def cache_dir() -> str | None:
    """The cache directory $XLAMLIR_CACHE_DIR asks for; None when the cache is off."""
    raw = os.environ.get(ENV_DIR)
    if raw is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return os.path.abspath(os.path.join(base, "xlamlir"))
    if raw.strip().lower() in _OFF:
        return None
    return os.path.abspath(os.path.expanduser(raw.strip()))


def max_bytes() -> int:
    """The size bound $XLAMLIR_CACHE_MAX_MB sets, in bytes (ArgumentError if it is no
    positive number)."""
    raw = os.environ.get(ENV_MAX_MB, "").strip()
    if not raw:
        return DEFAULT_MAX_MB << 20
    try:
        megabytes = float(raw)
    except ValueError:
        megabytes = float("nan")
    if not 0 < megabytes < float("inf"):
        raise ArgumentError(f"{ENV_MAX_MB} must be a positive number of megabytes, got {raw!r}")
    return int(megabytes * (1 << 20))


def _python_pass_name(spec: Any) -> str | None:
    """module:qualname of a module-level function of this library (its code is in the key
    through the source hash); None for any other callable."""
    if not isinstance(spec, types.FunctionType):
        return None
    module = spec.__module__ or ""
    if module != _PACKAGE and not module.startswith(_PACKAGE + "."):
        return None
    found: Any = sys.modules.get(module)
    for part in spec.__qualname__.split("."):
        found = getattr(found, part, None)
    return f"{module}:{spec.__qualname__}" if found is spec else None


def pipeline_text(pipeline: Any) -> tuple[str | None, str]:
    """The pipeline as text for the key, or (None, why it cannot be keyed)."""
    stages = []
    for stage, specs in pipeline.fingerprint():
        names = []
        for item in specs:
            spec = getattr(item, "spec", item)  # a Python pass comes wrapped for identity
            if isinstance(spec, str):
                names.append(spec)
                continue
            name = _python_pass_name(spec)
            if name is None:
                described = getattr(spec, "__qualname__", None) or repr(spec)
                return None, (f"the pipeline's Python pass {described!r} is not one of the "
                              f"library's own module-level functions (no stable name)")
            names.append(f"python:{name}")
        stages.append([stage, names])
    return json.dumps(stages), ""


@dataclass
class Loaded:
    """What an entry gives back: the library and all the Executable needs besides."""

    library: LoadedLibrary
    parameter_shapes: list[Shape]
    result_shape: Shape
    records: list[dict[str, str]]
    stages: StageTexts
    compiled_s: float
    dispatches_parallel_loops: bool
    runtime_library: bool


class _Corrupt(Exception):
    pass


@dataclass
class Entry:
    """The disk cache's part in one compile: where its entry is, and what happened."""

    directory: str | None
    key: str | None
    status: str = "off"  # "hit", "miss" or "off"
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)
    seconds: float = 0.0
    limit: int = DEFAULT_MAX_MB << 20  # $XLAMLIR_CACHE_MAX_MB when the compile began

    @property
    def path(self) -> str:
        assert self.directory is not None and self.key is not None
        return os.path.join(self.directory, self.key + SUFFIX)

    def stats(self) -> dict[str, Any]:
        """The disk cache's fields of compile_stats."""
        out: dict[str, Any] = {"disk_cache": self.status}
        if self.status == "off":
            out["disk_cache_reason"] = self.reason
        elif self.status == "hit":
            out["disk_cache_load_s"] = self.seconds
        else:
            out["disk_cache_store_s"] = self.seconds
        if self.notes:
            out["disk_cache_notes"] = list(self.notes)
        return out

    def reject(self, why: str) -> None:
        """The loaded entry proved unusable: drop it, so that this compile writes it anew."""
        self.notes.append(f"cached entry not used: {why}")
        self.status = "miss"
        _remove(self.path)

    def load(self, prepare: Any, before_runtime: Any = None) -> Loaded | None:
        """The entry's program, None on a miss (no entry, or a bad one, then deleted).
        `prepare()` loads what a library's missing symbols may need; `before_runtime()`,
        called before the library of a program that calls the runtime library
        (runtime/shared_runtime.py) is loaded, that library."""
        if self.key is None:
            return None
        self.status = "miss"
        cache_writer.wait_for(self.key)  # this process may be writing it
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        except OSError as e:
            self.notes.append(f"cannot read the entry: {e}")
            return None
        try:
            meta, image, stages = _decode(data, self.key)
            parameters = [Shape.parse(s) for s in meta["parameters"]]
            result = Shape.parse(meta["result"])
            records = [{str(k): str(v) for k, v in r.items()} for r in meta["records"]]
            compiled_s = float(meta["stats"].get("total_s", 0.0))
            parallel, runtime = meta["parallel"], meta["runtime_library"]
            if not isinstance(parallel, bool) or not isinstance(runtime, bool):
                raise ValueError("'parallel' or 'runtime_library' is not a bool")
            links = meta["links"]
            if not all(isinstance(pair, list) and len(pair) == 2
                       and all(isinstance(s, str) for s in pair) for pair in links):
                raise ValueError("'links' is not a list of symbol pairs")
        except Exception as e:  # noqa: BLE001 - whatever is wrong in the file, it is a miss
            self.reject(f"corrupt ({type(e).__name__}: {e})")
            return None
        if before_runtime is not None and runtime:
            before_runtime()
        try:
            library = open_library(image, [self.directory, None], prepare,
                                   keep_image=bool(os.environ.get("XLAMLIR_KEEP_OBJECT")))
            fill_slots(library.address, links)
        except OSError as e:
            self.reject(f"cannot load its library ({e})")
            return None
        _touch(self.path)
        self.status = "hit"
        return Loaded(library, parameters, result, records, stages, compiled_s, parallel, runtime)

    def loaded(self) -> None:
        """The program from the entry is ready: the time it took."""
        self.seconds = time.perf_counter() - self.started

    def store(self, engine: Any, records: list[dict[str, str]], executable: Any) -> None:
        """Store the entry of a program just compiled (the engine kept its object file).
        What the entry says of the program is taken now; the object file is dumped,
        linked and written in the background (runtime/cache_writer.py), the engine kept
        alive until then. Never raises: a failure is a note in compile_stats."""
        if self.key is None:
            return
        started = time.perf_counter()
        stats = executable.compile_stats
        meta = {"key": self.key, "name": executable.name,
                "parameters": [str(s) for s in executable.parameter_shapes],
                "result": str(executable.result_shape), "records": records,
                "parallel": bool(executable.dispatches_parallel_loops),
                "runtime_library": bool(executable.runtime_library),
                "links": links_of(engine),
                "stats": {k: stats[k] for k in ("parse_verify_s", "jit_s", "total_s") if k in stats}}
        shapes = [*executable.parameter_shapes, executable.result_shape]
        # Stages not printed yet stay bytecode (lowering/stage_texts.py).
        stages = executable.stages
        if not isinstance(stages, StageTexts):
            stages = StageTexts(stages)
        limit = self.limit
        cache_writer.submit(self.key, lambda: self._write(engine, shapes, meta, stages, limit, stats))
        self.seconds = time.perf_counter() - started

    def _write(self, engine: Any, shapes: list[Shape], meta: dict[str, Any],
               stages: StageTexts, limit: int, report: dict[str, Any]) -> None:
        """In the writer thread: dump the engine's object file, link the library, write
        the entry; the time it took, or why it failed, goes into `report` (the
        executable's compile_stats)."""
        assert self.directory is not None and self.key is not None
        started = time.perf_counter()
        note = None
        try:
            if any(Shape.parse(str(s)) != s for s in shapes):
                raise ValueError("a shape does not survive its text form")
            with tempfile.TemporaryDirectory(prefix="xlamlir-cache-") as work:
                objects = object_files(engine, work)
                if not all(os.path.exists(o) and os.path.getsize(o) for o in objects):
                    raise CompileError("the JIT kept no object file", "disk_cache")
                image = link_library(objects, [r["symbol"] for r in meta["records"]], work)
            data = _encode({**meta, "library_size": len(image)}, image,
                           zlib.compress(stages.to_bytes(), 1))
            if len(data) > limit:
                raise ValueError(f"the entry ({len(data)} bytes) is larger than {ENV_MAX_MB}")
            _write_atomically(self.directory, self.path, data)
            evict(self.directory, limit, keep=self.path)
        except Exception as e:  # noqa: BLE001 - the compile succeeded: a note, never an error
            note = f"not stored: {type(e).__name__}: {e}"
        with cache_writer.locked():
            report["disk_cache_write_s"] = time.perf_counter() - started
            if note is not None:
                self.notes.append(note)
                report.setdefault("disk_cache_notes", []).append(note)

    def report(self, stats: dict[str, Any]) -> None:
        """Put the disk cache's fields into `stats` (compile_stats); a background write
        that finishes later adds its own (`disk_cache_write_s`, a note if it failed)."""
        with cache_writer.locked():
            stats.update(self.stats())


def _unusable(directory: str | None) -> str:
    """Why machine code cannot be cached in `directory` on this machine ("" if it can)."""
    if directory is None:
        return f"turned off by {ENV_DIR}"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"only on Linux x86-64 (this is {sys.platform} {platform.machine()})"
    if _SOURCES is None:
        return "the library's source files could not be read"
    if _identity("host") is None:
        return "this machine's CPU is unknown (no /proc/cpuinfo flags)"
    if _identity("toolchain") is None:
        return "the MLIR/LLVM wheels could not be identified"
    if linker() is None:
        return "no linker (ld or ld.lld) on PATH"
    return ""


def code_identity() -> str | None:
    """What JIT-compiled machine code kept in the cache depends on besides its module (the
    entry format, the MLIR/LLVM wheels, this machine's CPU), for the runtime code built
    once per cache directory (runtime/shared_runtime.py); None when the cache is off or
    cannot hold machine code here."""
    if _unusable(cache_dir()):
        return None
    return json.dumps([FORMAT, _identity("toolchain"), _identity("host")])


def plan(text: str, pipeline: Any, cpu: str, **settings: Any) -> Entry:
    """The entry of a compile of `text` through `pipeline` for `cpu` with `settings`
    (num_replicas, dynamic_strides, name, the JIT's opt level...), or an Entry that is
    off, saying why."""
    directory = cache_dir()
    reason = _unusable(directory)
    if not reason and any(os.environ.get(name) for name in _RECOMPILE_ENV):
        reason = f"{', '.join(n for n in _RECOMPILE_ENV if os.environ.get(n))} asks for a compile"
    if reason:
        return Entry(None, None, reason=reason)
    pipeline_key, reason = pipeline_text(pipeline)
    if pipeline_key is None:
        return Entry(None, None, reason=reason)
    limit = max_bytes()  # a bad bound is an error before any work
    version = getattr(sys.modules.get(_PACKAGE), "__version__", "")
    head = json.dumps([FORMAT, version, _SOURCES, _identity("toolchain"), _identity("host"), cpu,
                       sorted(settings.items()), pipeline_key])
    key = hashlib.sha256(head.encode() + b"\0" + text.encode()).hexdigest()
    return Entry(directory, key, limit=limit)


def _encode(meta: dict[str, Any], image: bytes, stages: bytes) -> bytes:
    body = json.dumps(meta).encode()
    rest = body + image + stages
    return _HEADER.pack(_MAGIC, FORMAT, len(body), hashlib.sha256(rest).digest()) + rest


def _decode(data: bytes, key: str) -> tuple[dict[str, Any], bytes, StageTexts]:
    if len(data) < _HEADER.size:
        raise _Corrupt(f"truncated ({len(data)} bytes)")
    magic, version, length, digest = _HEADER.unpack_from(data)
    if magic != _MAGIC or version != FORMAT:
        raise _Corrupt("not an entry of this format")
    rest = memoryview(data)[_HEADER.size:]
    if hashlib.sha256(rest).digest() != digest:
        raise _Corrupt("checksum mismatch")
    meta = json.loads(bytes(rest[:length]))
    if meta.get("key") != key:
        raise _Corrupt("written for another key")
    end = length + int(meta["library_size"])
    image = bytes(rest[length:end])
    try:
        stages = StageTexts.from_bytes(zlib.decompress(rest[end:]))
    except (ValueError, zlib.error) as e:
        raise _Corrupt(f"stages: {e}") from None
    return meta, image, stages


def _write_atomically(directory: str, path: str, data: bytes) -> None:
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=".tmp-", suffix=".part", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(staging, path)
    except BaseException:
        _remove(staging)
        raise
    _touch(path)


def _touch(path: str) -> None:
    """Mark an entry as just used. Explicit nanoseconds: file times come from a coarse clock
    (a few ms), too coarse to order entries written or hit in quick succession."""
    now = time.time_ns()
    try:
        os.utime(path, ns=(now, now))
    except OSError:
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def evict(directory: str, limit: int, keep: str | None = None) -> None:
    """Delete the least recently used entries of `directory` until they take at most
    `limit` bytes (never `keep`, the entry just written), and stale temporary files."""
    entries: list[tuple[int, str, int]] = []
    total = 0
    now = time.time()
    try:
        scan = list(os.scandir(directory))
    except OSError:
        return
    for item in scan:
        try:
            st = item.stat(follow_symlinks=False)
        except OSError:
            continue
        if item.name.endswith(SUFFIX) and not item.name.startswith("."):
            entries.append((st.st_mtime_ns, item.path, st.st_size))
            total += st.st_size
        elif item.name.startswith((".tmp-", ".load-")) and now - st.st_mtime > _STALE_S:
            _remove(item.path)
    for _, path, size in sorted(entries):
        if total <= limit:
            break
        if path != keep:
            _remove(path)
            total -= size


def flush() -> None:
    """Wait until every entry this process compiled so far is written (they are linked
    and written in the background: runtime/cache_writer.py)."""
    cache_writer.flush()


def clear(directory: str | None = None) -> int:
    """Delete every entry of the cache directory (default: $XLAMLIR_CACHE_DIR's) and the
    C call path's built module; how many entries."""
    cache_writer.flush()  # entries still being written are entries too
    directory = directory or cache_dir()
    if directory is None or not os.path.isdir(directory):
        return 0
    removed = 0
    for item in os.scandir(directory):
        if item.name.endswith(SUFFIX):
            _remove(item.path)
            removed += 1
    _clear_fastcall(os.path.join(directory, FASTCALL_FOLDER))
    return removed


def _clear_fastcall(folder: str) -> None:
    """Remove the builds (call path modules, thread pools, runtime libraries) and their folder:
    nothing else deletes the old builds (~15-30 KB each). A process that loaded one keeps
    it (the file stays mapped); another process's build under way keeps its temporary
    files, and so the folder."""
    try:
        scan = list(os.scandir(folder))
    except OSError:
        return
    now = time.time()
    for item in scan:
        try:
            stale = now - item.stat(follow_symlinks=False).st_mtime > _STALE_S
        except OSError:
            continue
        if item.name.startswith(("_fastcall-", "_taskpool-", "_runtime-")) or (
                item.name.startswith(".tmp-") and stale):
            if item.is_dir(follow_symlinks=False):
                shutil.rmtree(item.path, ignore_errors=True)  # a runtime library build's
            else:
                _remove(item.path)
    try:
        os.rmdir(folder)
    except OSError:
        pass
