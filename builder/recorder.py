"""Recorder: what every XlaBuilder method builds on. It records ops with their inferred
shapes; MLIR is produced only by `build()` (`builder.emit`).

The op families (`builder.methods_*`) are mixins deriving from Recorder and use only
its public API:

- `check_operand(op, value)`: an XlaOp of this builder, or a ShapeError.
- `as_op(value, like)`, `scalar_as_op(op, value, like)`: a Python/numpy scalar as a
  constant (of `like`'s element type).
- `emit(op, operands, attrs)`: run the op's shape rule and record it; the only way
  ops enter a computation.
- `trace(op, computation, param_shapes, role)`: a sub-computation, given as an
  XlaComputation or traced from a callable on a fresh builder.
- `results(op, as_tuple)`: the results of a multi-result op as XlaOps.
- `parameter`, `constant`, `tuple`, `get_tuple_element`, `build`.

Every public method of a subclass (the op methods) is wrapped when the class is
created (`__init_subclass__`): a plain Python error escaping it because an argument
was of the wrong kind becomes a ShapeError naming the method and the argument
(`builder.argcheck`), and a call on a builder that is tracing a sub-computation acts
on the traced builder (so `b.max(x, 0.0)` inside a callable given to `b.map` works).
Imports `dialect`.
"""

from __future__ import annotations

import functools
import inspect
import numbers
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dialect.element_types import PrimitiveType, dtype_of, type_of
from ..dialect.errors import ShapeError, user_location
from ..dialect.registry import OpDef, lookup
from ..dialect.shape import Shape
from . import args
from .argcheck import checked
from .computation import XlaComputation
from .xla_op import XlaOp

# Methods about the builder itself, never redirected to a builder being traced.
_OWN_METHODS = frozenset({"parameter", "build"})


def is_number(value: Any) -> bool:
    """A Python or numpy number (or 0-d numeric array): what may stand for an operand."""
    if isinstance(value, np.ndarray):
        return value.ndim == 0 and value.dtype.kind in "biufc"
    return isinstance(value, (numbers.Number, np.number, np.bool_))


def _python_list_type(value: list[Any]) -> PrimitiveType | None:
    """The element type a (nested) list of Python scalars becomes, as its scalars would;
    None when it holds anything else (numpy values keep numpy's rules)."""
    types: set[PrimitiveType] = set()
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        t = _python_scalar_type(item)
        if t is None:
            return None
        types.add(t)
    for widest in (PrimitiveType.C64, PrimitiveType.F32, PrimitiveType.S32, PrimitiveType.PRED):
        if widest in types:
            return widest
    return PrimitiveType.F32  # an empty list: as 1.0 would


def _python_scalar_type(value: Any) -> PrimitiveType | None:
    if isinstance(value, np.generic):
        return None
    if isinstance(value, bool):
        return PrimitiveType.PRED
    if isinstance(value, int):
        return PrimitiveType.S32
    if isinstance(value, float):
        return PrimitiveType.F32
    if isinstance(value, complex):
        return PrimitiveType.C64
    return None


def _scalar_like(value: Any, shape: Shape) -> np.ndarray:
    """`value` as a 0-d array of `shape`'s dtype; ShapeError if that would change it (beyond
    rounding to a floating type), e.g. 1.5 or 2**40 for s32, 1j for f32."""
    array = np.asarray(value)
    t = shape.element_type
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            out = array.astype(shape.dtype)
    except (OverflowError, TypeError, ValueError):
        out = None
    exact = out is not None and (
        out.item() == array.item() if not (t.is_floating or t.is_complex)
        else t.is_complex or array.dtype.kind != "c" or array.item().imag == 0)
    if not exact:
        raise ShapeError("constant", [shape], f"the scalar {value!r} cannot be used as {t} "
                         "without changing its value")
    return out


def _program_shapes(computation: Any) -> Any:
    if isinstance(computation, (list, tuple)):
        return [c.program_shape() for c in computation]
    return computation.program_shape()


def _check_arity(op_name: str, role: str, computation: Any, param_shapes: Sequence[Shape],
                 shown: Sequence[Shape]) -> None:
    """ShapeError when a callable cannot take one argument per parameter (a wrong signature);
    the error names the op's operands `shown`."""
    try:
        signature = inspect.signature(computation)
    except (TypeError, ValueError):
        return  # a builtin or C callable: let the call itself decide
    try:
        signature.bind(*param_shapes)
    except TypeError:
        raise ShapeError(op_name, list(shown), f"the {role} must take {len(param_shapes)} "
                         f"parameters ({', '.join(map(str, param_shapes))}); {signature} cannot "
                         f"be called with {len(param_shapes)} parameter(s)") from None


def api_method(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A public XlaBuilder method as users call it: its arguments' kinds checked when it fails
    (`argcheck.checked`), a ShapeError it raises names the user's file and line, and, unless
    it is about the builder itself (`parameter`, `build`), run on the builder being traced
    while `self` traces a sub-computation."""
    checked_method = checked(fn.__name__, fn)
    own = fn.__name__ in _OWN_METHODS

    called = fn.__name__

    @functools.wraps(checked_method)
    def method(self: Recorder, *positional: Any, **keywords: Any) -> Any:
        while not own and self.tracing is not None:
            self = self.tracing
        outermost = not getattr(_calls, "depth", 0)
        _calls.depth = getattr(_calls, "depth", 0) + 1
        try:
            return checked_method(self, *positional, **keywords)
        except ShapeError as e:
            if outermost:
                locate(e, called)
            raise
        finally:
            _calls.depth -= 1

    return method


_calls = threading.local()  # how deep in public builder methods this thread is


def locate(error: ShapeError, called: str = "") -> None:
    """Append the user's file and line to `error`'s message, once, and name the method the
    user `called` where the op it built has another name (`clz` builds
    count_leading_zeros, `dot` a dot_general)."""
    message = str(error.args[0]) if error.args else ""
    message, at, where = message.partition(" (at ")
    if called and error.op != called and message.startswith(error.op):
        message = f"{called}{message[len(error.op):]} [{called} builds {error.op}]"
    if at:
        message = f"{message}{at}{where}"
    elif (location := user_location()) is not None:
        message = f"{message} (at {location[0]}:{location[1]})"
    if error.args:
        error.args = (message, *error.args[1:])


class Recorder:
    """Records one computation: `parameter`, `constant`, the ops, then `build`."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(value):
                setattr(cls, name, api_method(value))

    def __init__(self, name: str = "main") -> None:
        if not isinstance(name, str) or not name:
            raise ShapeError("XlaBuilder", [], f"the name must be a non-empty string, got {name!r}")
        self.name = name
        self.parameters: dict[int, XlaOp] = {}
        self.ops: list[XlaOp] = []
        # The builder of the sub-computation being traced from a callable, if any.
        self.tracing: Recorder | None = None

    def __repr__(self) -> str:
        return f"XlaBuilder({self.name!r}, {len(self.ops)} ops)"

    # -- recording ----------------------------------------------------------------------------

    def check_operand(self, op_name: str, operand: Any) -> XlaOp:
        """`operand` if it is an XlaOp of this builder; a ShapeError naming it otherwise."""
        if not isinstance(operand, XlaOp):
            raise ShapeError(op_name, [], f"expected an XlaOp operand, got {type(operand).__name__}")
        if operand.builder is not self:
            raise ShapeError(op_name, [operand.shape],
                             f"operand {operand!r} belongs to builder {operand.builder.name!r}, "
                             f"not {self.name!r} (computations are closed)")
        return operand

    def as_op(self, value: Any, like: XlaOp | None = None) -> XlaOp:
        """An XlaOp as is; a Python or numpy scalar as a constant of `like`'s element type."""
        if isinstance(value, XlaOp):
            return value
        if like is not None and like.shape.is_array() and is_number(value):
            return self.constant(_scalar_like(value, like.shape))
        return self.constant(value)

    def scalar_as_op(self, op_name: str, value: Any, like: XlaOp) -> XlaOp:
        """A Python/numpy number as a constant of `like`'s element type; anything else must be
        an XlaOp of this builder (`b.max(x, 0.0)`, `b.clamp(0, x, 6)`)."""
        if is_number(value):
            return self.as_op(value, like=self.check_operand(op_name, like))
        return self.check_operand(op_name, value)

    def emit(self, opdef: OpDef | str, operands: Sequence[Any],
             attrs: dict[str, Any] | None = None) -> XlaOp:
        """Run the op's shape rule and record it; a variadic operand is a list of XlaOps."""
        if isinstance(opdef, str):
            opdef = lookup(opdef)
        attrs = dict(attrs or {})
        args: list[Any] = []
        shapes: list[Any] = []
        for spec, operand in zip(opdef.operands, operands, strict=True):
            if spec.variadic:
                group = tuple(self.check_operand(opdef.name, o) for o in operand)
                args.append(group)
                shapes.append(tuple(o.shape for o in group))
            else:
                op = self.check_operand(opdef.name, operand)
                args.append(op)
                shapes.append(op.shape)
        if any(s.is_dynamic() for group in shapes for s in (group if isinstance(group, tuple) else (group,))):
            # Bounded dynamism is resolved by the builder (builder/methods_dynamic.py).
            return self._emit_dynamic(opdef, args, attrs)
        # A shape rule sees a sub-computation as its program shape (params, result).
        infer_attrs = {k: (_program_shapes(v) if k in opdef.computations else v)
                       for k, v in attrs.items()}
        location = user_location()
        try:
            shape = opdef.infer(*shapes, **infer_attrs)
            if shape.is_dynamic():  # from a sub-computation's result: no size to carry
                raise ShapeError(opdef.name, [], f"its sub-computation returns {shape}; a "
                                 "sub-computation returning a dynamic dimension is not supported yet")
        except ShapeError as e:
            locate(e)
            raise
        op = XlaOp(self, shape, opdef=opdef, operands=tuple(args), attrs=attrs, location=location)
        self.ops.append(op)
        return op

    def _emit_dynamic(self, opdef: OpDef, operands: Sequence[Any], attrs: dict[str, Any]) -> XlaOp:
        raise ShapeError(opdef.name, [], "this builder has no bounded dynamic shapes")

    def results(self, op: XlaOp, as_tuple: bool) -> XlaOp:
        """A multi-result op's results as XlaOps: the first, or a tuple of all of them."""
        outs = [XlaOp(self, s, source=op, index=i, location=op.location)
                for i, s in enumerate(op.shape.tuple_shapes)]
        # Recorded so that build() with no root returns the last result, not the op itself.
        self.ops.extend(outs)
        return self.tuple(outs) if as_tuple else outs[0]

    def trace(self, op_name: str, computation: Any, param_shapes: Sequence[Shape],
              role: str = "computation", operands: Sequence[XlaOp] = ()) -> XlaComputation:
        """The sub-computation taking `param_shapes`: an XlaComputation of that signature, or a
        callable traced with fresh parameters on a new builder. A wrong signature's error
        names the op's `operands` (else the parameters)."""
        # Computations see values in the default layout (XLA compares shapes without them).
        param_shapes = [s.with_default_layout() if not s.is_token() else s for s in param_shapes]
        shown = [o.shape for o in operands] or param_shapes
        if isinstance(computation, XlaComputation):
            given = [s.with_default_layout() if not s.is_token() else s
                     for s in computation.program_shape()[0]]
            if given != list(param_shapes):
                raise ShapeError(op_name, shown,
                                 f"{role} {computation.name!r} takes ({', '.join(map(str, given))}) "
                                 f"but is called with ({', '.join(map(str, param_shapes))})")
            return computation
        if not callable(computation):
            raise ShapeError(op_name, [], f"{role} must be an XlaComputation or a callable, "
                             f"got {type(computation).__name__}")
        _check_arity(op_name, role, computation, param_shapes, shown)
        sub = type(self)(f"{self.name}_{op_name}_{role}")
        params = [sub.parameter(i, s) for i, s in enumerate(param_shapes)]
        outer, self.tracing = self.tracing, sub
        try:
            root = computation(*params)
        finally:
            self.tracing = outer
        if isinstance(root, (list, tuple)):
            root = sub.tuple(list(root))
        if not isinstance(root, XlaOp):
            raise ShapeError(op_name, [], f"{role} must return an XlaOp (or a list of them), "
                             f"got {type(root).__name__}")
        if root.builder is not sub:
            raise ShapeError(op_name, [root.shape], f"{role} returned {root!r}, an op of builder "
                             f"{root.builder.name!r}; sub-computations are closed")
        return sub.build(root)

    # -- parameters, constants and tuples ---------------------------------------------------------

    @api_method
    def parameter(self, number: int, shape: Shape, name: str = "") -> XlaOp:
        given = number
        number = args.integer("parameter", number, "the parameter number")
        if number < 0:
            raise ShapeError("parameter", [], f"the parameter number must be an int >= 0, got {given!r}")
        if not isinstance(shape, Shape):
            raise ShapeError("parameter", [], f"expected an xm.Shape, got {type(shape).__name__}")
        if number in self.parameters:
            raise ShapeError("parameter", [shape], f"parameter number {number} is already defined")
        if shape.is_dynamic():
            raise ShapeError("parameter", [shape], "a parameter with a dynamic dimension is not "
                             "supported yet; pass the padded array and its size (s32), then "
                             "set_dimension_size")
        op = XlaOp(self, shape, parameter_number=number, parameter_name=name, location=user_location())
        self.parameters[number] = op
        self.ops.append(op)
        return op

    @api_method
    def constant(self, value: Any) -> XlaOp:
        """A literal: numpy values keep their dtype; Python bool/int/float/complex scalars,
        and (nested) Python lists of them, become PRED/S32/F32/C64 (a list by its widest
        element: any complex -> C64, else any float -> F32, else any int -> S32); a Python
        tuple becomes a tuple constant."""
        if isinstance(value, tuple):
            return self.tuple([self.constant(v) for v in value])
        scalar_type = _python_scalar_type(value)
        if scalar_type is None and isinstance(value, list):
            scalar_type = _python_list_type(value)
        if scalar_type is not None:
            array = np.asarray(value)
            if scalar_type == PrimitiveType.S32 and array.size and not (
                    -(2**31) <= array.min() and array.max() < 2**31):
                raise ShapeError("constant", [], f"the Python int {value} does not fit in s32; "
                                 "pass a numpy value of a wider type")
            array = array.astype(dtype_of(scalar_type))
        else:
            array = np.asarray(value)
        try:
            element_type = type_of(array.dtype)
        except ShapeError:
            raise ShapeError("constant", [],
                             f"no XLA element type for a value of dtype {array.dtype}") from None
        shape = Shape.array(element_type, array.shape)
        op = XlaOp(self, shape, opdef=lookup("constant"), operands=(),
                   attrs={"value": array.copy(), "shape": shape}, location=user_location())
        self.ops.append(op)
        return op

    @api_method
    def tuple(self, elements: Sequence[XlaOp]) -> XlaOp:
        return self.emit("tuple", [list(elements)])

    @api_method
    def get_tuple_element(self, tuple_data: XlaOp, index: int) -> XlaOp:
        tuple_data = self.check_operand("get_tuple_element", tuple_data)
        index = args.integer("get_tuple_element", index, "index")
        if tuple_data.opdef is not None and tuple_data.opdef.name == "tuple":
            # Direct forwarding keeps the graph small; the shape rule still runs.
            lookup("get_tuple_element").infer(tuple_data.shape, index=index)
            return tuple_data.operands[0][index]
        return self.emit("get_tuple_element", [tuple_data], {"index": index})

    # -- building -------------------------------------------------------------------------------

    @api_method
    def build(self, root: XlaOp | Sequence[XlaOp] | None = None) -> XlaComputation:
        if isinstance(root, (list, tuple)):
            root = self.tuple(list(root))
        if root is None:
            if not self.ops:
                raise ShapeError("build", [], f"builder {self.name!r} has no ops to return")
            root = self.ops[-1]
        root = self.check_operand("build", root)
        return XlaComputation.from_builder(self, root)
