"""`exe.stages`: the module's text after each stage, printed the first time it is read.

Printing every stage was 5-10% of a compile (attention [8,512,64]: 31 ms of 345; softmax
1024^2: 10 of 118) that most compiles never read. A stage is kept as a bytecode snapshot
instead (about a fifth of the printing: 6 ms for attention, and a quarter of the text's
size) and printed from it on first read: the same text, since the printer sees the same
module (tests/test_stage_texts_lazy.py). The first stage stays text: it is small, and the
compile reads it (the entry's dynamic result, the fork-safe recompile).

`StageTexts` is an ordered `dict[str, str]` (the API's type): reading a value, by key or
through values()/items()/comparison/copying, prints it; the bytes form (`to_bytes`)
keeps the snapshots unprinted for the disk cache.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

from mlir import ir

from ..dialect.context import reused_context


class Snapshot:
    """A module's state as bytecode, printed on demand (with its ops' source locations
    when `locations`)."""

    __slots__ = ("bytecode", "locations")

    def __init__(self, bytecode: bytes, locations: bool) -> None:
        self.bytecode = bytecode
        self.locations = locations

    @classmethod
    def of(cls, module: ir.Module, locations: bool) -> Snapshot:
        out = io.BytesIO()
        module.operation.write_bytecode(out)
        return cls(out.getvalue(), locations)

    def text(self) -> str:
        """The module's text as printing it when the snapshot was taken gave it."""
        with reused_context(len(self.bytecode)):
            module = ir.Module.parse(self.bytecode)
            # Verified when parsed: the printer need not verify it again.
            return module.operation.get_asm(enable_debug_info=self.locations, assume_verified=True)


class _Pending:
    """A stage's text not printed yet: its snapshot, and how `exe.stages` shows it."""

    __slots__ = ("snapshot", "shown")

    def __init__(self, snapshot: Snapshot, shown: Callable[[str], str]) -> None:
        self.snapshot = snapshot
        self.shown = shown

    def text(self) -> str:
        return self.shown(self.snapshot.text())


class StageTexts(dict):
    """Stage name -> text, in pipeline order; a value given as a `_Pending` is printed on
    first read and kept."""

    def __getitem__(self, key: str) -> str:
        value = dict.__getitem__(self, key)
        if isinstance(value, _Pending):
            value = value.text()
            dict.__setitem__(self, key, value)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default

    def printed(self, key: str) -> bool:
        """Whether the text of stage `key` exists already (reading it costs nothing)."""
        return not isinstance(dict.__getitem__(self, key), _Pending)

    def _print_all(self) -> None:
        for key in self:
            self[key]

    # Everything that reads values in bulk prints them first. __iter__ is overridden so
    # that dict(...), {**...} and dict.update take the keys-then-__getitem__ path, never
    # the raw values.
    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self)

    def values(self) -> Any:
        self._print_all()
        return dict.values(self)

    def items(self) -> Any:
        self._print_all()
        return dict.items(self)

    def copy(self) -> dict[str, str]:
        return dict(self.items())

    def __eq__(self, other: object) -> bool:
        self._print_all()
        if isinstance(other, StageTexts):
            other._print_all()
        return dict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._print_all()
        return dict.__repr__(self)

    def __or__(self, other: Any) -> dict[str, str]:
        return dict(self.items()) | other

    def __ror__(self, other: Any) -> dict[str, str]:
        return other | dict(self.items())

    def __reduce__(self) -> Any:
        return (dict, (dict(self.items()),))

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self[key]
        return dict.pop(self, key, *default)

    def popitem(self) -> tuple[str, str]:
        self._print_all()
        return dict.popitem(self)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        return dict.setdefault(self, key, default)

    # The disk cache's form: a JSON index, then each stage's text or bytecode.
    def to_bytes(self) -> bytes:
        index, blobs = [], []
        for key in self:
            value = dict.__getitem__(self, key)
            if isinstance(value, _Pending):
                index.append([key, "bytecode", len(value.snapshot.bytecode),
                              value.snapshot.locations, _SHOWN_NAMES[value.shown]])
                blobs.append(value.snapshot.bytecode)
            else:
                data = value.encode()
                index.append([key, "text", len(data)])
                blobs.append(data)
        head = json.dumps(index).encode()
        return struct.pack("<I", len(head)) + head + b"".join(blobs)

    @classmethod
    def from_bytes(cls, data: bytes) -> StageTexts:
        """The stages `to_bytes` wrote; ValueError if `data` is not that."""
        try:
            return cls._from_bytes(data)
        except (KeyError, IndexError, TypeError, struct.error, UnicodeDecodeError) as e:
            raise ValueError(f"not the stages' bytes ({type(e).__name__}: {e})") from None

    @classmethod
    def _from_bytes(cls, data: bytes) -> StageTexts:
        (length,) = struct.unpack_from("<I", data)
        index = json.loads(data[4:4 + length])
        stages, at = cls(), 4 + length
        for item in index:
            key, kind, size = item[0], item[1], int(item[2])
            blob = bytes(data[at:at + size])
            if len(blob) != size or not isinstance(key, str):
                raise ValueError("truncated stages")
            at += size
            if kind == "text":
                dict.__setitem__(stages, key, blob.decode())
            elif kind == "bytecode":
                dict.__setitem__(stages, key, _Pending(Snapshot(blob, bool(item[3])), SHOWN[item[4]]))
            else:
                raise ValueError(f"a stage of unknown kind {kind!r}")
        if at != len(data):
            raise ValueError("trailing bytes after the stages")
        return stages


#: How a stage's printed text is shown, by name (the disk cache stores the name).
SHOWN: dict[str, Callable[[str], str]] = {}
_SHOWN_NAMES: dict[Callable[[str], str], str] = {}


def shown_as(name: str) -> Callable[[Callable[[str], str]], Callable[[str], str]]:
    def register(fn: Callable[[str], str]) -> Callable[[str], str]:
        SHOWN[name] = fn
        _SHOWN_NAMES[fn] = name
        return fn

    return register


def pending(snapshot: Snapshot, shown: Callable[[str], str]) -> _Pending:
    """A stage value for `StageTexts`: `snapshot` printed, then passed through `shown`
    (one of the functions registered with `shown_as`)."""
    assert shown in _SHOWN_NAMES, "the disk cache must be able to name how a stage is shown"
    return _Pending(snapshot, shown)
