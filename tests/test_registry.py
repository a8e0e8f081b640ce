"""The registry is the single source of truth: every op has a lowering and every builder
name it lists is a method of XlaBuilder (made from the registry for the 1:1 ops); the
builder's modules import each other without a circle."""

from __future__ import annotations

import ast
import inspect
import pathlib

import xlamlir as xm
from xlamlir.dialect.context import new_context
from xlamlir.dialect.registry import REGISTRY
from xlamlir.lowering.patterns.framework import LOWERINGS, missing_lowerings


def test_every_op_has_a_lowering() -> None:
    import xlamlir.lowering.lower_pass  # noqa: F401  (registers every lowering)

    assert missing_lowerings() == []
    assert set(LOWERINGS) <= set(REGISTRY)


def test_every_builder_name_of_the_registry_is_a_method() -> None:
    names = {name for opdef in REGISTRY.values() for name in opdef.builders}
    assert len(names) > 60
    missing = sorted(n for n in names if not callable(getattr(xm.XlaBuilder, n, None)))
    assert missing == []


def test_generated_methods_show_their_signature_and_doc() -> None:
    add = xm.XlaBuilder.add
    assert add.__name__ == "add"
    assert list(inspect.signature(add).parameters) == ["self", "lhs", "rhs", "broadcast_dimensions"]
    assert "xhlo.add" in add.__doc__
    assert list(inspect.signature(xm.XlaBuilder.exp).parameters) == ["self", "operand"]
    assert "GE" in xm.XlaBuilder.ge.__doc__
    assert "add" in dir(xm.XlaBuilder)


def test_a_new_unary_op_gets_its_method_from_the_registry_alone() -> None:
    from xlamlir.builder.methods_generated import registry_methods
    from xlamlir.dialect.element_types import PrimitiveType
    from xlamlir.dialect.ops_elementwise import unary

    unary("test_only_op", frozenset({PrimitiveType.F32}), ("test_only",))
    try:
        method = registry_methods()["test_only"]
        b = xm.XlaBuilder("new_op")
        x = b.parameter(0, xm.Shape.array(xm.F32, (2,)))
        assert method(b, x).opdef.name == "test_only_op"
    finally:
        del REGISTRY["test_only_op"]


def _builder_imports() -> dict[str, set[str]]:
    """module -> the builder modules it imports when it runs (TYPE_CHECKING blocks aside)."""
    import xlamlir.builder as package

    directory = pathlib.Path(package.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in sorted(directory.glob("*.py")):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
        imported: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only or not isinstance(node, ast.ImportFrom) or node.level != 1:
                continue
            if node.module:
                imported.add(node.module.split(".")[0])
            else:
                imported.update(alias.name for alias in node.names)
        graph[path.stem] = imported
    return graph


def test_the_builder_modules_import_no_circle() -> None:
    # Read from the source: at run time the package's __init__ always imports first, which
    # would hide a circle that a different first import runs into.
    graph = _builder_imports()
    assert "builder" in graph["__init__"] and "recorder" in graph["methods_shape"]
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        assert module not in path, f"import circle: {' -> '.join([*path, module])}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])


def test_xhlo_ops_are_unregistered_in_the_context() -> None:
    """MLIR does not know our ops (dialect/verify.py checks them): a context that registered
    an xhlo op would verify it twice, and differently."""
    ctx = new_context()
    assert ctx.allow_unregistered_dialects
    assert not any(ctx.is_registered_operation(opdef.full_name) for opdef in REGISTRY.values())


def test_total_order_and_logical_not_sugar() -> None:
    import numpy as np

    b = xm.XlaBuilder("sugar")
    x = b.parameter(0, xm.Shape.array(xm.F32, (4,)))
    y = b.parameter(1, xm.Shape.array(xm.F32, (4,)))
    b.tuple([b.lt_total_order(x, y), b.eq_total_order(x, y), b.logical_not(b.lt(x, y))])
    xv = np.array([-0.0, np.nan, 1.0, -np.nan], np.float32)
    yv = np.array([0.0, np.nan, 2.0, 1.0], np.float32)
    lt, eq, not_lt = xm.compile(b.build())(xv, yv)
    assert lt.tolist() == [True, False, True, True]  # -0 < +0, -NaN below everything
    assert eq.tolist() == [False, True, False, False]
    assert not_lt.tolist() == [True, True, False, True]
    import pytest

    with pytest.raises(xm.ShapeError, match="pred"):
        b.logical_not(x)
