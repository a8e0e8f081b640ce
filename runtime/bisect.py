"""Which pass changed the numbers: `exe.bisect(*args)` runs the program after every pass.

The method. The executable's pipeline is a list of passes p_0..p_{n-1}, stage by
stage. For every i, the input module (the `hlo` stage) is compiled with
p_0..p_i followed by a known-good completion, the default pipeline's passes that
have not run yet, and run on the arguments:

- within p_i's stage S, the stage's passes are aligned with the default pipeline's
  passes of S (longest common subsequence; a pass matches when its text is equal or
  it is the same Python function). The completion is the default passes of S after
  the last one aligned with p_0..p_i, then the default stages after S;
- so a pass the user inserted never runs in a completion, and a default pass the
  user removed or replaced does. Every candidate holds only p_0..p_i of the user's
  passes: if they are right (and the default pipeline is), so is its result. The
  first candidate whose result differs from the reference names the pass whose
  output, finished by trusted passes, computes something else;
- a pass that leaves the module text unchanged gives the previous candidate's result
  (the same module goes through the same passes), without a compile.

The reference is the caller's value (numpy), or by default the result of the
`linalg` stage finished by the default pipeline: then a wrong lowering to linalg
(or a wrong pass in the hlo/linalg stages) is invisible; give a numpy reference to
check those. Passes of the `hlo` stage are not bisected (the executable keeps the
module only after them). Imports `dialect`, `lowering` and `runtime.compiler`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mlir import ir

from ..dialect.context import new_context
from ..dialect.errors import ArgumentError, XlaError
from ..lowering.pipeline import PassSpec, Pipeline, describe_pass


@dataclass
class BisectStep:
    """One row: the program compiled with the passes up to this one (then the default)."""

    index: int
    stage: str
    pass_name: str
    max_error: float | None  # None: no result (the candidate did not compile or run)
    ok: bool | None
    note: str = ""


@dataclass
class BisectReport:
    """The first pass whose result differs from the reference, and every pass's row."""

    steps: list[BisectStep]
    reference: str  # what the results were compared with
    rtol: float
    atol: float
    final_error: float  # the executable's own result against the reference
    skipped: list[str] = field(default_factory=list)  # hlo-stage passes, not bisected

    @property
    def first_bad(self) -> BisectStep | None:
        return next((s for s in self.steps if s.ok is False), None)

    @property
    def first_bad_pass(self) -> str | None:
        bad = self.first_bad
        return bad.pass_name if bad else None

    @property
    def stage(self) -> str | None:
        bad = self.first_bad
        return bad.stage if bad else None

    @property
    def max_error(self) -> float | None:
        bad = self.first_bad
        return bad.max_error if bad else None

    def __repr__(self) -> str:
        bad = self.first_bad
        where = f"{bad.stage}/{bad.pass_name}" if bad else None
        return f"BisectReport(first_bad={where!r}, max_error={self.max_error}, steps={len(self.steps)})"

    def __str__(self) -> str:
        bad = self.first_bad
        if bad is None:
            head = (f"no pass changed the numbers (every result within rtol={self.rtol:g}, "
                    f"atol={self.atol:g} of {self.reference})")
        else:
            head = (f"first pass that changed the numbers: #{bad.index} {bad.pass_name!r} of stage "
                    f"{bad.stage!r}, max abs error {bad.max_error:.3g} (rtol={self.rtol:g}, "
                    f"atol={self.atol:g}; reference: {self.reference})")
        width = max([len(s.pass_name[:60]) for s in self.steps] + [4])
        lines = [head, f"the executable's own result: max abs error {self.final_error:.3g}", "",
                 f"{'#':>3}  {'stage':<11} {'pass':<{width}}  {'max error':>10}  verdict"]
        for s in self.steps:
            error = "-" if s.max_error is None else f"{s.max_error:.3g}"
            verdict = {True: "ok", False: "DIFFERS", None: "?"}[s.ok]
            mark = "  <-- first" if s is bad else ""
            note = f"  ({s.note})" if s.note else ""
            lines.append(f"{s.index:>3}  {s.stage:<11} {s.pass_name[:60]:<{width}}  {error:>10}  "
                         f"{verdict}{mark}{note}")
        if self.skipped:
            lines.append(f"not bisected (hlo stage, before the kept input): {', '.join(self.skipped)}")
        return "\n".join(lines)


def _same(a: PassSpec, b: PassSpec) -> bool:
    return a == b if isinstance(a, str) and isinstance(b, str) else a is b


def _alignment(user: list[PassSpec], default: list[PassSpec]) -> list[int]:
    """For each prefix user[:j+1], the index in `default` of the last default pass it has
    run (-1: none), by a longest common subsequence of the two lists."""
    n, m = len(user), len(default)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for k in range(m - 1, -1, -1):
            table[i][k] = (table[i + 1][k + 1] + 1 if _same(user[i], default[k])
                           else max(table[i + 1][k], table[i][k + 1]))
    matched = [-1] * n
    i = k = 0
    while i < n and k < m:
        if _same(user[i], default[k]):
            matched[i] = k
            i, k = i + 1, k + 1
        elif table[i + 1][k] >= table[i][k + 1]:
            i += 1
        else:
            k += 1
    last, out = -1, []
    for k in matched:
        last = max(last, k)
        out.append(last)
    return out


def candidate(pipeline: Pipeline, stage: str, count: int) -> Pipeline:
    """`pipeline`'s passes before `stage`, its first `count` passes of `stage`, then the
    default pipeline's passes not run yet (the module docstring's completion). The
    `hlo` stage is left empty: candidates start from the executable's `hlo` text."""
    default = Pipeline.default()
    if stage not in default.stage_names:
        raise ArgumentError(f"bisect: stage {stage!r} is not a stage of the default pipeline "
                            f"({', '.join(default.stage_names)})")
    names = pipeline.stage_names
    user_passes = pipeline.passes(stage)
    done = _alignment(user_passes, default.passes(stage))[count - 1] if count else -1
    stages: list[tuple[str, list[PassSpec]]] = []
    for name in names[:names.index(stage)]:
        stages.append((name, [] if name == names[0] else pipeline.passes(name)))
    stages.append((stage, user_passes[:count] + default.passes(stage)[done + 1:]))
    later = default.stage_names[default.stage_names.index(stage) + 1:]
    stages += [(name, default.passes(name)) for name in later]
    return Pipeline(stages)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _as_float(a: np.ndarray) -> np.ndarray:
    if np.iscomplexobj(a):
        return a.astype(np.complex128)
    return a.astype(np.float64)


def max_error(result: Any, reference: Any) -> float:
    """The largest absolute difference over every leaf; inf for another structure or
    shape, or a NaN on one side only."""
    got, want = _leaves(result), _leaves(reference)
    if len(got) != len(want):
        return math.inf
    worst = 0.0
    for g, w in zip(got, want):
        if g is None and w is None:  # tokens
            continue
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return math.inf
        if g.size == 0:
            continue
        g, w = _as_float(g), _as_float(w)
        nan_g, nan_w = np.isnan(g), np.isnan(w)
        if (nan_g != nan_w).any():
            return math.inf
        with np.errstate(invalid="ignore"):
            diff = np.abs(np.where(nan_g, 0, g) - np.where(nan_w, 0, w))
        diff = np.where(np.isnan(diff), 0.0, diff)  # inf - inf: equal infinities
        worst = max(worst, float(diff.max()))
    return worst


def close(result: Any, reference: Any, rtol: float, atol: float) -> bool:
    got, want = _leaves(result), _leaves(reference)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g is None or w is None:
            if g is not w:
                return False
            continue
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or not np.allclose(_as_float(g), _as_float(w), rtol=rtol, atol=atol,
                                                 equal_nan=True):
            return False
    return True


def _pass_texts(text: str, pipeline: Pipeline) -> list[str]:
    """The module text after every pass (the `hlo` stage's passes left out)."""
    first = pipeline.stage_names[0]
    stripped = Pipeline([(n, [] if n == first else pipeline.passes(n)) for n in pipeline.stage_names])
    after: list[tuple[str, str, str]] = []
    with new_context(), ir.Location.unknown():
        module = ir.Module.parse(text)
        start = str(module)
        stripped.run(module, after_each_pass=after)
    return [start] + [t for _, _, t in after]


def bisect_executable(exe: Any, args: tuple[Any, ...], reference: Any = None,
                      rtol: float = 1e-5, atol: float = 1e-6) -> BisectReport:
    """The report of `exe.bisect(*args, ...)` (the module docstring says how)."""
    # Lazy: executables offer exe.bisect (compiler -> executable -> bisect -> compiler).
    from .compiler import compile_mlir

    if getattr(exe, "num_replicas", 1) != 1:
        raise ArgumentError("bisect runs single-replica programs only")
    pipeline: Pipeline = getattr(exe, "pipeline", None) or Pipeline.default()
    text = exe.stages[pipeline.stage_names[0]]
    if any(op in text for op in ("xhlo.infeed", "xhlo.outfeed", "xhlo.send", "xhlo.recv")):
        raise ArgumentError("bisect cannot run programs with infeed/outfeed/send/recv "
                            "(each candidate would wait for its own feed)")
    own = exe(*args)  # checks the arguments before any compile
    options: dict[str, Any] = {"name": exe.name}
    cpu = getattr(exe, "target_cpu", "host")
    if cpu not in (None, "host"):
        options["target_cpu"] = cpu

    def run(candidate_pipeline: Pipeline) -> Any:
        return compile_mlir(text, candidate_pipeline, **options)(*args)

    described = "the caller's reference"
    if reference is None:
        if "linalg" not in pipeline.stage_names:
            raise ArgumentError("bisect: no `linalg` stage to take the default reference from; "
                                "pass reference=")
        reference = run(candidate(pipeline, "linalg", len(pipeline.passes("linalg"))))
        described = "the linalg stage finished by the default pipeline"

    texts = _pass_texts(text, pipeline)
    steps: list[BisectStep] = []
    index = 0
    previous: tuple[float | None, bool | None] | None = None
    for stage in pipeline.stage_names[1:]:
        for count, spec in enumerate(pipeline.passes(stage), start=1):
            name, note = describe_pass(spec), ""
            if previous is not None and texts[index + 1] == texts[index]:
                error, ok = previous
                note = "module unchanged"
            else:
                try:
                    result = run(candidate(pipeline, stage, count))
                except XlaError as e:
                    error, ok, note = None, None, f"{type(e).__name__}: {str(e).splitlines()[0]}"
                else:
                    error, ok = max_error(result, reference), close(result, reference, rtol, atol)
            steps.append(BisectStep(index, stage, name, error, ok, note))
            previous = (error, ok)
            index += 1
    skipped = [describe_pass(p) for p in pipeline.passes(pipeline.stage_names[0])]
    return BisectReport(steps, described, rtol, atol, max_error(own, reference), skipped)
