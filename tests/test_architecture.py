"""The package's layers (docs/architecture.md): which module may import which, and no
import circle. Parsed with `ast`, nothing imported: an import at module level (outside
`if TYPE_CHECKING:`) runs when the module is imported, so it must follow the layers and
the module-level imports must form no circle. A function-local (lazy) import is allowed
only where `LAZY` below says why; it is then left out of the circle check."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import xlamlir as xm

ROOT = Path(xm.__file__).resolve().parent
SKIPPED = {"tests", "bench", "examples", "docs", "build", ".venv", ".git"}

# Top-level parts, and the parts each may import (besides itself). The root modules
# (xlamlir/__init__.py, cli.py, distributed.py) are the API on top: they may import anything.
LAYERS: dict[str, set[str]] = {
    "dialect": set(),
    "builder": {"dialect"},
    "lowering": {"dialect"},
    "runtime": {"dialect", "lowering"},
    "stablehlo_import": {"dialect", "builder", "runtime"},
}
# Inside lowering: scalar code <- the rewrite mechanism <- op lowerings <- the xhlo pass
# <- the pipeline. The pipeline's own passes see the mechanism at most, never an op.
LOWERING: dict[str, set[str]] = {
    "scalar": set(),
    "register_transpose": set(),
    "pass_managers": set(),
    "patterns": {"scalar"},
    "ops": {"scalar", "patterns", "register_transpose"},
    "passes": {"scalar", "patterns", "register_transpose", "pass_managers"},
    "lower_pass": {"ops", "patterns"},
    "reproducer": set(),
    "stage_texts": set(),
    "pipeline": {"passes", "lower_pass", "reproducer", "stage_texts", "pass_managers"},
    "schedules": {"passes"},
    "__init__": {"pipeline"},
}
# Function-local imports of our modules, and why each is not at module level.
LAZY: dict[tuple[str, str], str] = {
    ("xlamlir.cli", "*"): "a subcommand imports what it needs when it runs: `xlamlir --help` "
                          "does not load MLIR",
    ("xlamlir.runtime.executable", "xlamlir.runtime.bisect"):
        "exe.bisect compiles every candidate (bisect -> compiler -> executable)",
    ("xlamlir.lowering.reproducer", "xlamlir.lowering.pipeline"):
        "the pipeline writes reproducers (pipeline -> reproducer); replaying one runs the "
        "pass as the pipeline does",
    ("xlamlir.runtime.bisect", "xlamlir.runtime.compiler"):
        "bisect compiles every candidate, and executables offer exe.bisect",
    ("xlamlir.stablehlo_import", "*"): "the importer needs jaxlib (the optional `jax` extra) "
                                       "only when used, and compiles through the root API",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["xlamlir", *parts])


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        if not SKIPPED & set(path.relative_to(ROOT).parts):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The modules of ours an `from ... import ...` statement loads (submodules by name)."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target != "xlamlir" and not target.startswith("xlamlir."):
        return []
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(module: str, path: Path) -> tuple[set[str], set[str]]:
    """(module-level imports, function-local imports) of our modules."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    top: set[str] = set()
    lazy: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                names = {a.name for a in child.names if a.name.split(".")[0] == "xlamlir"}
                (lazy if in_function else top).update(names)
            elif isinstance(child, ast.ImportFrom):
                (lazy if in_function else top).update(_resolve(module, is_package, child))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                           ast.Lambda)))

    visit(tree, False)
    return top - {module}, lazy - {module}


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in LAYERS) else "<root>"


def _lowering_part(module: str) -> str:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 else "__init__"


def _allowed(importer: str, imported: str) -> bool:
    a, b = _part(importer), _part(imported)
    if a == "<root>" or a == b and a != "lowering":
        return True
    if a == "lowering" and b == "lowering":
        x, y = _lowering_part(importer), _lowering_part(imported)
        return x == y or y in LOWERING.get(x, set())
    return b in LAYERS.get(a, set())


def test_every_part_is_known() -> None:
    parts = {_part(m) for m in MODULES} - {"<root>"}
    assert parts <= set(LAYERS), f"add {parts - set(LAYERS)} to LAYERS and docs/architecture.md"
    lowering = {_lowering_part(m) for m in MODULES if _part(m) == "lowering"}
    assert lowering <= set(LOWERING), f"add {lowering - set(LOWERING)} to LOWERING"


@pytest.mark.parametrize("importer", sorted(MODULES))
def test_imports_follow_the_layers(importer: str) -> None:
    """Module-level imports; a lazy one against the layers is one of `LAZY`'s reasons."""
    top, _ = GRAPH[importer]
    wrong = sorted(m for m in top if not _allowed(importer, m))
    assert not wrong, f"{importer} imports {wrong} against the layers of docs/architecture.md"


@pytest.mark.parametrize("importer", sorted(MODULES))
def test_lazy_imports_say_why(importer: str) -> None:
    _, lazy = GRAPH[importer]
    package = ".".join(importer.split(".")[:2])
    unexplained = sorted(m for m in lazy if (importer, m) not in LAZY and (importer, "*") not in LAZY
                         and (package, "*") not in LAZY)
    assert not unexplained, (f"{importer} imports {unexplained} inside a function: import at module "
                             f"level, or add the reason to LAZY")


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return circles


def test_no_import_circle() -> None:
    circles = _circles({m: top for m, (top, _) in GRAPH.items()})
    assert not circles, f"import circles at module level: {circles}"


def test_the_test_sees_a_wrong_import() -> None:
    """The checks above would fail for a dialect module importing the runtime."""
    assert not _allowed("xlamlir.dialect.shape", "xlamlir.runtime.compiler")
    assert not _allowed("xlamlir.lowering.scalar.arithmetic", "xlamlir.lowering.ops.core")
    assert not _allowed("xlamlir.lowering.passes.fusion", "xlamlir.lowering.ops.reduce")
    assert _allowed("xlamlir.runtime.export", "xlamlir.lowering.pipeline")
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
