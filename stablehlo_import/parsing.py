"""StableHLO source (text, bytecode, portable artifact, jax `Lowered`) -> a jaxlib MLIR module,
legalized and refined so that every op left is a static-shaped StableHLO op.

jaxlib's MLIR (not xlamlir's own `mlir` bindings) parses: it is the one with the stablehlo,
chlo and vhlo dialects and their passes. Its objects never leave this package.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any

from ..dialect.errors import CompileError

# Run in order on the whole module. chlo ops become StableHLO (erf, top_k, sinh...);
# shape refinement and canonicalize-dynamism turn dynamic ops whose shape operands are
# constants into static ones. (The `inline` pass is a no-op here: jaxlib's context has no
# inliner for func.call, so the importer inlines calls itself.)
_PASSES = ("builtin.module(func.func(chlo-legalize-to-stablehlo),stablehlo-refine-shapes,"
           "func.func(stablehlo-canonicalize-dynamism))")
_LOCK = threading.Lock()


def jaxlib_modules() -> tuple[Any, Any, Any]:
    """(ir, passmanager, stablehlo) of jaxlib; CompileError when jax is not installed."""
    try:
        from jaxlib.mlir import ir, passmanager
        from jaxlib.mlir.dialects import stablehlo
    except ImportError as e:
        raise CompileError("importing StableHLO needs jax (pip install 'xlamlir[jax]'): "
                           f"{e}") from e
    return ir, passmanager, stablehlo


@functools.cache
def context() -> Any:
    """One jaxlib MLIR context with func, stablehlo, chlo and vhlo, and the stablehlo passes."""
    jaxlib_modules()
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir.dialects import stablehlo

    stablehlo.register_stablehlo_passes()
    ctx = jax_mlir.make_ir_context()
    ctx.allow_unregistered_dialects = False
    return ctx


def _lowered_text(lowered: Any) -> str:
    """A jax `Lowered`'s StableHLO text, with its Python source locations when jax gives them."""
    try:
        return lowered.as_text(debug_info=True)
    except TypeError:
        return lowered.as_text()


def _diagnostics(e: Exception) -> str:
    text = str(e)
    return re.sub(r"^Unable to parse module assembly:\s*", "", text).strip()


def parse(source: Any, filename: str | None = None) -> Any:
    """The module of `source`, parsed in `context()` (not yet legalized)."""
    ir, _, stablehlo = jaxlib_modules()
    ctx = context()
    if hasattr(source, "as_text") and hasattr(source, "compiler_ir"):
        source = _lowered_text(source)
    elif hasattr(source, "mlir_module_serialized"):
        source = source.mlir_module_serialized  # a jax.export.Exported: a portable artifact
    elif hasattr(source, "operation") and hasattr(source.operation, "get_asm"):
        # A module from some other context (e.g. jax's `compiler_ir()`): never mutate it.
        source = source.operation.get_asm(enable_debug_info=True)
    where = filename or "<input>"
    with ctx, _LOCK:
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            if not data.startswith(b"ML\xefR"):
                try:
                    text = data.decode()
                except UnicodeDecodeError:
                    raise CompileError(f"{where}: not StableHLO: neither MLIR bytecode (no 'ML\\xefR' "
                                       "magic) nor UTF-8 text") from None
                return _parse_text(ir, text, where)
            try:
                # A portable artifact (VHLO bytecode) upgrades to the current StableHLO.
                return stablehlo.deserialize_portable_artifact(ctx, data)
            except Exception:  # noqa: BLE001 - not an artifact: plain bytecode, tried next
                pass
            try:
                return ir.Module.parse(data)
            except Exception as e:  # noqa: BLE001 - jaxlib raises MLIRError or ValueError
                raise CompileError(f"{where}: MLIR bytecode does not parse: {_diagnostics(e)}",
                                   stage="import", diagnostics=str(e)) from None
        if not isinstance(source, str):
            raise CompileError(f"import_stablehlo takes StableHLO text, bytes or a jax Lowered, "
                               f"got {type(source).__name__}", stage="import")
        return _parse_text(ir, source, where)


def _parse_text(ir: Any, text: str, where: str) -> Any:
    try:
        return ir.Module.parse(text)
    except Exception as e:  # noqa: BLE001 - jaxlib raises MLIRError or ValueError
        message = _diagnostics(e).replace('"-":', f"{where}:")
        raise CompileError(f"StableHLO does not parse: {message}", stage="import",
                           diagnostics=str(e)) from None


#: The custom_call target chlo.ragged_dot becomes before legalization (stablehlo_import/ops_linalg.py
#: imports it as XlaBuilder.ragged_dot); its backend_config holds the dimension numbers.
RAGGED_DOT_TARGET = "xlamlir.chlo.ragged_dot"
RAGGED_DOT_FIELDS = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
                     "rhs_contracting_dimensions", "lhs_ragged_dimensions", "rhs_group_dimensions")


def _ops_named(op: Any, name: str) -> list[Any]:
    found = []
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                if inner.operation.name == name:
                    found.append(inner)
                found += _ops_named(inner.operation, name)
    return found


def _keep_ragged_dots(ir: Any, stablehlo: Any, module: Any) -> None:
    """chlo-legalize-to-stablehlo unrolls a chlo.ragged_dot into one masked dot per group (a
    program per expert count); as a custom_call it stays one op, imported as ragged_dot."""
    from jaxlib.mlir.dialects import chlo

    for op in _ops_named(module.operation, "chlo.ragged_dot"):
        attributes = op.operation.attributes
        d = chlo.RaggedDotDimensionNumbers(attributes["ragged_dot_dimension_numbers"])
        config = [f"{f}={','.join(str(i) for i in getattr(d, f))}" for f in RAGGED_DOT_FIELDS]
        levels = attributes["precision_config"] if "precision_config" in attributes else []
        config.append("precision=" + ",".join(chlo.PrecisionAttr(a).value for a in levels))
        with ir.InsertionPoint(op), op.location:
            call = stablehlo.CustomCallOp([r.type for r in op.results], list(op.operands),
                                          call_target_name=RAGGED_DOT_TARGET,
                                          backend_config=ir.StringAttr.get(";".join(config)))
        op.results[0].replace_all_uses_with(call.results[0])
        op.operation.erase()


def legalize(module: Any, filename: str | None = None) -> None:
    """Run the legalization passes in place; a failure is a CompileError with MLIR's diagnostics."""
    ir, passmanager, stablehlo = jaxlib_modules()
    with context(), _LOCK:
        _keep_ragged_dots(ir, stablehlo, module)
        pm = passmanager.PassManager.parse(_PASSES)
        try:
            pm.run(module.operation)
        except Exception as e:  # noqa: BLE001 - MLIRError
            message = str(e).replace('"-":', f"{filename or '<input>'}:")
            raise CompileError(f"StableHLO cannot be legalized: {message}", stage="import",
                               diagnostics=str(e)) from None


def location(op: Any, filename: str | None = None) -> str:
    """`op`'s source location as text: `file:line:col` for parsed text, jax's name and Python
    file:line for a lowered program, `unknown location` when there is none."""
    text = str(op.location)
    if text == "loc(unknown)":
        return "unknown location"
    text = text.removeprefix("loc(").removesuffix(")")
    return text.replace('"-":', f"{filename or '<input>'}:")
