"""The exception hierarchy of xlamlir. Imports nothing of ours."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any


class XlaError(Exception):
    """Base of every error xlamlir raises on purpose."""


class ShapeError(XlaError, ValueError):
    """An op was built with operands or attributes its shape rule rejects."""

    def __init__(self, op: str, operands: Iterable[Any] = (), rule: str = "") -> None:
        shapes = ", ".join(str(s) for s in operands)
        super().__init__(f"{op}({shapes}): {rule}" if shapes else f"{op}: {rule}")
        self.op = op
        self.rule = rule


class ArgumentError(XlaError, TypeError):
    """An executable was called with arguments that do not match its parameters."""


class CompileError(XlaError, RuntimeError):
    """A pipeline stage failed; carries the stage name and MLIR's diagnostics."""

    def __init__(self, message: str, stage: str = "", diagnostics: str = "") -> None:
        super().__init__(message)
        self.stage = stage
        self.diagnostics = diagnostics


_PACKAGE = __name__.split(".")[0]


def user_location() -> tuple[str, int] | None:
    """File and line of the innermost caller outside this package (where an error or an
    op is attributed to the user's code).

    Decided by the frame's module name, not its file's path: the package's directory is
    the repository's root, and a user's model.py or the examples there are not ours."""
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module != _PACKAGE and not module.startswith(_PACKAGE + "."):
            return frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back
    return None
