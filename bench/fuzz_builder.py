"""Long run of the builder fuzzer (tests/builder_fuzzer.py; tests/test_fuzz_builder.py is the
CI-sized run).

Builds random computations from consecutive seeds until --cases or --seconds runs out, and
prints the counts: cases tried, computations built (module verified), builder calls made, calls
that raised ShapeError, and failures (anything else escaping, or a built module that does not
verify), grouped by where they came from, each with the first seed that shows it. Replay one
with `--seed SEED --cases 1 -v`.

With --compile, every computation that built is also compiled and run (on zeros) in a
worker process, so a crash in MLIR or in the generated code is counted (with its signal)
instead of ending the run; compile errors and run errors are counted too.

    python bench/fuzz_builder.py --seconds 600
    python bench/fuzz_builder.py --cases 20000 --garbage 0.2
    python bench/fuzz_builder.py --seconds 600 --compile
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import re
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from builder_fuzzer import RandomSource, run_case  # noqa: E402

_SHAPES = re.compile(r"\(?[a-z0-9]+\[[0-9,]*\](\{[0-9,]*\})?(, )?\)?")


def _key(failure: str) -> str:
    """A failure's kind: its first line's head and the innermost frame in the package."""
    lines = failure.split("\n")
    frames = [ln.strip() for ln in lines if ln.strip().startswith("File ") and "/tests/" not in ln]
    return f"{lines[0].split(':')[0][:80]} @ {frames[-1] if frames else '-'}"


def _worker(tasks: Any, results: Any) -> None:
    """Compile (and, when it cannot block, run on zeros) each module text it is sent."""
    import numpy as np

    import xlamlir as xm

    while True:
        text = tasks.get()
        try:
            exe = xm.compile_mlir(text)
        except xm.XlaError as e:
            results.put(("compile_error", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            continue
        except Exception as e:  # noqa: BLE001
            results.put(("compile_exception", f"{type(e).__name__}: {str(e)[:160]}"))
            continue
        if any(op in text for op in ("xhlo.infeed", "xhlo.recv", "xhlo.custom_call")):
            results.put(("compiled", ""))  # would wait for data or call an unknown target
            continue

        def zeros(shape: Any) -> Any:
            if shape.is_tuple():
                return tuple(zeros(s) for s in shape.tuple_shapes)
            return np.zeros(shape.dimensions, shape.dtype)
        try:
            exe(*[zeros(s) for s in exe.parameter_shapes])
            results.put(("ran", ""))
        except Exception as e:  # noqa: BLE001
            results.put(("run_error", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))


class CompileWorker:
    """A child process compiling and running modules; restarted after a crash or a hang."""

    def __init__(self) -> None:
        self.ctx = multiprocessing.get_context("spawn")
        self.proc: Any = None
        self.start()

    def start(self) -> None:
        self.tasks, self.results = self.ctx.Queue(), self.ctx.Queue()
        self.proc = self.ctx.Process(target=_worker, args=(self.tasks, self.results), daemon=True)
        self.proc.start()

    def run(self, text: str, timeout: float = 120.0) -> tuple[str, str]:
        import queue

        self.tasks.put(text)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return self.results.get(timeout=0.5)
            except queue.Empty:
                if not self.proc.is_alive():
                    code = self.proc.exitcode
                    self.start()
                    return "crash", f"worker died with exit code {code}"
        self.proc.kill()
        self.proc.join()
        self.start()
        return "hang", f"no answer in {timeout:.0f} s"

    def close(self) -> None:
        self.proc.kill()
        self.proc.join()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=None, help="number of cases (default: no limit)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this long (default 60 unless --cases is given)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--steps", type=int, default=8, help="most builder calls per case")
    parser.add_argument("--garbage", type=float, default=0.03,
                        help="how often an argument is of the wrong kind altogether")
    parser.add_argument("--compile", action="store_true",
                        help="also compile and run every built computation in a worker process")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case's trace")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (None if args.cases else 60.0)

    counts: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    compile_kinds: collections.Counter[str] = collections.Counter()
    worker = CompileWorker() if args.compile else None
    first: dict[str, tuple[int, str]] = {}
    start = time.perf_counter()
    seed = args.seed
    while True:
        if args.cases is not None and counts["cases"] >= args.cases:
            break
        if seconds is not None and time.perf_counter() - start >= seconds:
            break
        out = run_case(RandomSource(seed), args.steps, args.garbage)
        counts["cases"] += 1
        counts["calls"] += out.calls
        counts["ops_built"] += out.ok
        counts["shape_errors"] += out.shape_errors
        counts["built"] += out.built
        counts["build_shape_errors"] += out.build_shape_error
        if args.verbose:
            print(f"-- seed {seed}")
            print("\n".join(f"  {line}" for line in out.trace))
        if worker is not None and out.built and out.text is not None:
            status, detail = worker.run(out.text)
            counts[status] += 1
            if status in ("crash", "hang", "compile_exception", "compile_error", "run_error"):
                key = f"{status}: {_SHAPES.sub('T', detail)[:100]}"
                compile_kinds[key] += 1
                first.setdefault(key, (seed, detail))
            if status in ("crash", "hang", "compile_exception"):
                counts["failures"] += 1
        if out.failure:
            counts["failures"] += 1
            key = _key(out.failure)
            kinds[key] += 1
            first.setdefault(key, (seed, out.failure))
            if args.verbose:
                print(out.failure)
        seed += 1
    elapsed = time.perf_counter() - start
    print(f"fuzz_builder: {counts['cases']} cases (seeds {args.seed}..{seed - 1}) in {elapsed:.0f} s, "
          f"garbage rate {args.garbage}")
    print(f"  builder calls {counts['calls']}: {counts['ops_built']} ok, "
          f"{counts['shape_errors']} ShapeError")
    print(f"  computations built and verified {counts['built']}, build() ShapeError "
          f"{counts['build_shape_errors']}")
    if worker is not None:
        worker.close()
        print(f"  compiled and ran {counts['ran']}, compiled only (infeed/recv/custom call) "
              f"{counts['compiled']}, CompileError {counts['compile_error']}, run errors "
              f"{counts['run_error']}, crashes {counts['crash']}, hangs {counts['hang']}, other "
              f"compile exceptions {counts['compile_exception']}")
        for key, n in compile_kinds.most_common():
            print(f"  {n:6d}  {key}\n          first seed {first[key][0]}")
    print(f"  failures {counts['failures']} ({len(kinds)} kinds)")
    for key, n in kinds.most_common():
        s, failure = first[key]
        print(f"  {n:6d}  {key}\n          first seed {s}: {failure.splitlines()[0][:200]}")
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
