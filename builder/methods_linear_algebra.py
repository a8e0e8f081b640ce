"""Hand-written XlaBuilder methods of the linear_algebra family. Imports `dialect` and `builder`.

Every function in METHODS becomes a method of XlaBuilder (see builder/__init__.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

METHODS: dict[str, Callable[..., Any]] = {}
