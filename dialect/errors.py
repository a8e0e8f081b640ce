"""The exception hierarchy of xlamlir. Imports nothing of ours."""

from __future__ import annotations

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
