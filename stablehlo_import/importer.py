"""Walks a legalized StableHLO module and rebuilds it with the public XlaBuilder API, so an
imported program is exactly a built one.

Values map to XlaOps in an environment per builder. Regions become sub-computations:
closed ones (reduce, sort, scatter... bodies) take their block arguments as parameters;
StableHLO also lets regions use values of the enclosing function (implicit capture), which
XLA computations cannot: a captured constant is rebuilt inside the sub-computation, any other
captured value is threaded through the operands of `while`/`if`/`case`, and refused elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..builder import XlaBuilder, XlaComputation, XlaOp
from ..dialect.errors import CompileError, ShapeError, XlaError
from ..dialect.shape import Shape
from . import parsing
from .types import Unsupported, shape_of

Handler = Callable[["OpContext"], "XlaOp | Sequence[XlaOp] | None"]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    """Register a handler for the StableHLO ops `names` (full names, e.g. `stablehlo.add`)."""
    def register(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn
    return register


class OpContext:
    """What a handler sees of one op: its builder, operands as XlaOps, attributes, result shapes."""

    def __init__(self, importer: Importer, b: XlaBuilder, op: Any, env: dict[Any, XlaOp]) -> None:
        self.importer = importer
        self.b = b
        self.op = op
        self.env = env
        self.name = op.operation.name

    @property
    def operands(self) -> list[XlaOp]:
        return [self.importer.lookup(self.env, v, self.op) for v in self.op.operands]

    @property
    def result_shapes(self) -> list[Shape]:
        return [shape_of(r.type) for r in self.op.results]

    @property
    def result_shape(self) -> Shape:
        return shape_of(self.op.results[0].type)

    def has(self, name: str) -> bool:
        return name in self.op.operation.attributes

    def attr(self, name: str, default: Any = None) -> Any:
        attributes = self.op.operation.attributes
        return attributes[name] if name in attributes else default

    def ints(self, name: str, default: Sequence[int] | None = None) -> list[int]:
        """An i64 array attribute (`array<i64: ...>`) or 1-D dense int elements, as a list."""
        attr = self.attr(name)
        if attr is None:
            if default is None:
                raise Unsupported(f"attribute {name!r} is missing")
            return list(default)
        try:
            return [int(x) for x in attr]
        except TypeError:  # a multi-dimensional dense elements attribute (e.g. padding)
            return [int(x) for x in np.array(attr).reshape(-1)]

    def int(self, name: str, default: int | None = None) -> int:
        attr = self.attr(name)
        if attr is None:
            if default is None:
                raise Unsupported(f"attribute {name!r} is missing")
            return default
        return int(attr.value)

    def bool(self, name: str, default: bool = False) -> bool:
        attr = self.attr(name)
        return default if attr is None else bool(attr.value)

    def float(self, name: str) -> float:
        attr = self.attr(name)
        if attr is None:
            raise Unsupported(f"attribute {name!r} is missing")
        return float(attr.value)

    def str(self, name: str, default: str = "") -> str:
        attr = self.attr(name)
        return default if attr is None else attr.value

    def enum(self, name: str, default: str | None = None) -> str | None:
        """A StableHLO enum attribute (#stablehlo<comparison_direction LT>...) as its keyword."""
        attr = self.attr(name)
        if attr is None:
            return default
        if hasattr(attr, "value") and isinstance(attr.value, str):
            return attr.value
        return str(attr).rstrip(">").split()[-1]

    def closed(self, index: int, role: str) -> XlaComputation:
        """Region `index` as a closed sub-computation of its block arguments."""
        return self.importer.closed_computation(self.op.regions[index], f"{self.b.name}_{role}", self.op)

    def unpack(self, value: XlaOp, count: int) -> list[XlaOp]:
        """`count` results from one XlaOp: itself for 1, its tuple elements otherwise."""
        if count == 1:
            return [value]
        return [self.b.get_tuple_element(value, i) for i in range(count)]


class Importer:
    """One module's import: its functions by name, the replica count, shared region builds."""

    def __init__(self, module: Any, filename: str | None = None) -> None:
        self.module = module
        self.filename = filename
        self.functions: dict[str, Any] = {}
        for op in module.body.operations:
            if op.operation.name == "func.func":
                self.functions[op.attributes["sym_name"].value] = op
        attributes = module.operation.attributes
        self.num_replicas = int(attributes["mhlo.num_replicas"].value) \
            if "mhlo.num_replicas" in attributes else 1
        if self.num_replicas < 1:
            raise CompileError(f"the module's mhlo.num_replicas is {self.num_replicas}; it must be >= 1",
                               stage="import")
        self._regions: dict[str, XlaComputation] = {}
        self._resources: dict[str, bytes] | None = None

    def resource(self, name: str) -> bytes | None:
        """The blob of the module's builtin dialect resource `name` (for dense_resource constants),
        read from the printed module once: jaxlib has no accessor for blobs."""
        if self._resources is None:
            text = self.module.operation.get_asm()
            section = text[text.find("{-#"):] if "{-#" in text else ""
            self._resources = {key.strip('"'): bytes.fromhex(data) for key, data in
                               re.findall(r'([\w."$-]+)\s*:\s*"0x([0-9A-Fa-f]*)"', section)}
        return self._resources.get(name.strip('"'))

    # -- functions ---------------------------------------------------------------------------

    def entry(self) -> XlaComputation:
        """`@main` as a computation: its parameters in order, several results as a tuple."""
        func = self.functions.get("main")
        if func is None:
            names = ", ".join(f"@{n}" for n in self.functions) or "none"
            raise CompileError(f"the module has no entry function @main (functions: {names})",
                               stage="import")
        block = func.regions[0].blocks[0]
        b = XlaBuilder(_builder_name(self.module))
        env: dict[Any, XlaOp] = {}
        for i, arg in enumerate(block.arguments):
            try:
                env[arg] = b.parameter(i, shape_of(arg.type), name=f"arg{i}")
            except Unsupported as e:
                raise CompileError(f"cannot import parameter {i} of @main at "
                                   f"{parsing.location(func, self.filename)}: {e}",
                                   stage="import") from None
        results = self.block(b, block, env)
        try:
            return b.build(results[0] if len(results) == 1 else b.tuple(results))
        except XlaError as e:
            raise CompileError(f"cannot import the results of @main: {e}", stage="import") from e

    # -- blocks and ops ----------------------------------------------------------------------

    def block(self, b: XlaBuilder, block: Any, env: dict[Any, XlaOp]) -> list[XlaOp]:
        """Import `block`'s ops into `b`; returns the XlaOps its terminator returns."""
        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                return [self.lookup(env, v, op) for v in op.operands]
            self.op(b, op, env)
        raise CompileError("a block has no terminator", stage="import")

    def op(self, b: XlaBuilder, op: Any, env: dict[Any, XlaOp]) -> None:
        name = op.operation.name
        handler = HANDLERS.get(name)
        if handler is None:
            raise self.error(op, "no xlamlir counterpart for this op")
        try:
            values = handler(OpContext(self, b, op, env))
        except CompileError:
            raise  # from a nested region: it names its own op
        except (ShapeError, Unsupported) as e:
            raise self.error(op, str(e)) from None
        except XlaError as e:
            raise self.error(op, f"{type(e).__name__}: {e}") from e
        except Exception as e:  # noqa: BLE001 - a handler bug must not crash the caller
            raise self.error(op, f"internal error {type(e).__name__}: {e}") from e
        if values is None:
            values = []
        elif isinstance(values, XlaOp):
            values = [values]
        results = list(op.results)
        if len(values) != len(results):
            raise self.error(op, f"imported as {len(values)} values for {len(results)} results")
        for result, value in zip(results, values):
            env[result] = value

    def error(self, op: Any, message: str) -> CompileError:
        name = op.operation.name
        return CompileError(f"cannot import {name} at {parsing.location(op, self.filename)}: {message}",
                            stage="import")

    def lookup(self, env: dict[Any, XlaOp], value: Any, op: Any) -> XlaOp:
        try:
            return env[value]
        except KeyError:
            raise self.error(op, "an operand is defined outside the region and cannot be "
                             "captured here") from None

    # -- regions -----------------------------------------------------------------------------

    def closed_computation(self, region: Any, name: str, op: Any) -> XlaComputation:
        """A region whose block arguments are its parameters; only constants may be captured.
        Regions with the same text share one computation (every `add` reducer of a program is
        built once: a build costs tens of milliseconds)."""
        block = region.blocks[0]
        free = free_values(region)
        key = None if free else "\n".join(str(o) for o in block.operations) + str(
            [str(a.type) for a in block.arguments])
        if key is not None and key in self._regions:
            return self._regions[key]
        sub = XlaBuilder(name)
        env: dict[Any, XlaOp] = {}
        for i, arg in enumerate(block.arguments):
            env[arg] = sub.parameter(i, shape_of(arg.type))
        for value in free:
            if not self.rebuild_constant(sub, value, env):
                raise self.error(op, "its region uses a non-constant value of the enclosing "
                                 "function; only while/if/case regions can capture values")
        results = self.block(sub, block, env)
        computation = sub.build(results[0] if len(results) == 1 else sub.tuple(results))
        if key is not None:
            self._regions[key] = computation
        return computation

    def threaded_computation(self, region: Any, param: Shape, n_args: int, captured: list[Any],
                             name: str, extra_results: bool, single: bool) -> XlaComputation:
        """A region taking one parameter of shape `param`: its `n_args` block arguments then the
        `captured` values (a tuple, or with `single` the one value itself). With
        `extra_results` the captured values are returned after the region's results (a
        while body must return what it received)."""
        block = region.blocks[0]
        sub = XlaBuilder(name)
        p = sub.parameter(0, param)
        count = n_args + len(captured)
        values = [p] if single else [sub.get_tuple_element(p, i) for i in range(count)]
        env: dict[Any, XlaOp] = {}
        for arg, value in zip(block.arguments, values[:n_args]):
            env[arg] = value
        for v, value in zip(captured, values[n_args:]):
            env[v] = value
        for value in free_values(region):
            if value not in env:
                self.rebuild_constant(sub, value, env)
        results = self.block(sub, block, env)
        if extra_results:
            results = results + values[n_args:]
        return sub.build(results[0] if len(results) == 1 else sub.tuple(results))

    def captures(self, regions: Sequence[Any]) -> list[Any]:
        """Values the regions use from outside, except constants (rebuilt inside)."""
        seen: dict[Any, None] = {}
        for region in regions:
            for v in free_values(region):
                if not _is_constant(v):
                    seen[v] = None
        return list(seen)

    def rebuild_constant(self, sub: XlaBuilder, value: Any, env: dict[Any, XlaOp]) -> bool:
        owner = _defining_op(value)
        if owner is None or owner.name != "stablehlo.constant":
            return False
        self.op(sub, owner, env)
        return True


def _defining_op(value: Any) -> Any:
    from jaxlib.mlir import ir

    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def _is_constant(value: Any) -> bool:
    owner = _defining_op(value)
    return owner is not None and owner.name == "stablehlo.constant"


def free_values(region: Any) -> list[Any]:
    """Values used inside `region` (at any depth) but defined outside it, in first-use order."""
    defined: set[Any] = set()
    used: dict[Any, None] = {}

    def walk(r: Any) -> None:
        for block in r.blocks:
            for arg in block.arguments:
                defined.add(arg)
            for op in block.operations:
                for v in op.operands:
                    used[v] = None
                for res in op.results:
                    defined.add(res)
                for inner in op.regions:
                    walk(inner)

    walk(region)
    return [v for v in used if v not in defined]


def _builder_name(module: Any) -> str:
    if "sym_name" in module.operation.attributes:
        # jax names the module `jit_f`: the computation (and an exported C symbol) keeps it.
        return module.operation.attributes["sym_name"].value
    return "main"
