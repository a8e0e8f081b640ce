"""XLA's array layout: an immutable ``minor_to_major`` permutation."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .errors import ShapeError
from .sequences import int_list


class Layout:
    """An array layout: ``minor_to_major`` lists the dimensions from most minor to most major.

    Immutable, hashable, equal by value. ``minor_to_major`` must be a
    permutation of ``range(len(minor_to_major))``.
    """

    __slots__ = ("_minor_to_major",)
    _minor_to_major: tuple[int, ...]

    def __init__(self, minor_to_major: Iterable[int]) -> None:
        mtm = int_list(minor_to_major, "minor_to_major", "Layout")
        if sorted(mtm) != list(range(len(mtm))):
            raise ShapeError(
                "Layout",
                [],
                f"minor_to_major {list(mtm)} is not a permutation of range({len(mtm)})",
            )
        object.__setattr__(self, "_minor_to_major", mtm)

    @classmethod
    def default(cls, rank: int) -> Layout:
        """The default (row-major) layout of a rank-``rank`` array: ``(rank-1, ..., 0)``."""
        return cls(range(rank - 1, -1, -1))

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        return self._minor_to_major

    @property
    def rank(self) -> int:
        return len(self._minor_to_major)

    def is_default(self) -> bool:
        """True if this is the row-major layout of its rank."""
        n = len(self._minor_to_major)
        return self._minor_to_major == tuple(range(n - 1, -1, -1))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Layout is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Layout is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Layout):
            return NotImplemented
        return self._minor_to_major == other._minor_to_major

    def __hash__(self) -> int:
        return hash(("Layout", self._minor_to_major))

    def __repr__(self) -> str:
        return f"Layout({self._minor_to_major!r})"

    def __str__(self) -> str:
        return "{" + ",".join(str(d) for d in self._minor_to_major) + "}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Layout, (self._minor_to_major,))
