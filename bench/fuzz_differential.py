"""Long run of the differential fuzzer (tests/differential_fuzzer.py and
tests/differential_fuzzer_ops.py, every op family, against the numpy reference
interpreter `evaluate` in tests/reference.py; tests/test_fuzz_differential.py is the
CI-sized run).

Generates, compiles and runs random valid computations from consecutive seeds until
--cases or --seconds runs out, and prints the counts: cases tried, cases that matched,
mismatches, and errors (an exception while building, compiling or running a valid
program), each kind with the first seed that shows it. Replay one with
`--seed SEED --cases 1 -v`. Odd seeds compile with every parallel loop's body in the
second JIT engine (runtime/split_jit.py), as the suite's run does. While it runs it
prints a progress line every --progress seconds and names every case slower than
--slow seconds (a run killed from outside still says how far it got).

    python bench/fuzz_differential.py --seconds 600
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import os
import sys
import threading
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from builder_fuzzer import RandomSource  # noqa: E402
from differential_fuzzer import check_case, make_case  # noqa: E402


def _watchdog(seed: int, timeout: float, counts: collections.Counter) -> threading.Timer:
    """Ends the run if one case hangs (a loop that never exits, a compile that never ends),
    saying which seed: the timer needs the GIL, so faulthandler's own watchdog thread, which
    does not, dumps the stacks and exits a little later as a backstop."""
    def expire() -> None:
        print(f"seed {seed}: still running after {timeout:.0f} s (hang or pathological "
              f"compile); {counts['cases'] - 1} cases before it, {counts['failures']} failures",
              flush=True)
        faulthandler.dump_traceback(all_threads=True)
        os._exit(3)
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(timeout + 30, exit=True)
    return timer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=None, help="number of cases (default: no limit)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this long (default 60 unless --cases is given)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--ops", type=int, default=10, help="most generated ops per case")
    parser.add_argument("--case-timeout", type=float, default=120.0,
                        help="a case running longer is reported with its seed and ends the run")
    parser.add_argument("--log", default=None,
                        help="append each seed to this file before running it (a crash of the "
                             "process then names its seed; faulthandler prints the stack)")
    parser.add_argument("--progress", type=float, default=60.0,
                        help="print the counts this often, in seconds (0: only at the end)")
    parser.add_argument("--slow", type=float, default=20.0,
                        help="name every case that takes longer than this, in seconds")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every case's ops (and the module of a failing one)")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (None if args.cases else 60.0)

    counts: collections.Counter[str] = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
    first: dict[str, tuple[int, str]] = {}
    seeds: collections.defaultdict[str, list[int]] = collections.defaultdict(list)
    faulthandler.enable()
    log = open(args.log, "a", buffering=1) if args.log else None  # noqa: SIM115 - whole run
    start = time.perf_counter()
    reported = start
    seed = args.seed
    while True:
        if args.cases is not None and counts["cases"] >= args.cases:
            break
        if seconds is not None and time.perf_counter() - start >= seconds:
            break
        counts["cases"] += 1
        case = None
        if log:
            log.write(f"{seed}\n")
        watchdog = _watchdog(seed, args.case_timeout, counts)
        began = time.perf_counter()
        try:
            case = make_case(RandomSource(seed), args.ops)
            problem = check_case(case, split_jit=seed % 2 == 1)
            kind = "mismatch" if problem else None
        except Exception as e:  # noqa: BLE001 - every escape is a finding
            problem = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            kind = f"error {type(e).__name__}"
        finally:
            watchdog.cancel()
            faulthandler.cancel_dump_traceback_later()
        if args.verbose and case is not None:
            print(f"-- seed {seed}")
            print("\n".join(f"  {line}" for line in case.trace))
        if problem:
            counts["failures"] += 1
            key = f"{kind}: {problem.splitlines()[0][:100]}" if kind != "mismatch" else kind
            kinds[key] += 1
            first.setdefault(key, (seed, problem))
            seeds[key].append(seed)
            if args.verbose:
                print(problem)
                if case is not None:
                    print(case.computation.as_mlir_text())
        else:
            counts["matched"] += 1
        now = time.perf_counter()
        if now - began > args.slow:
            print(f"seed {seed}: {now - began:.0f} s", flush=True)
        if args.progress and now - reported >= args.progress:
            reported = now
            print(f"... {counts['cases']} cases (seeds {args.seed}..{seed}) in {now - start:.0f} s, "
                  f"{counts['failures']} failures", flush=True)
        seed += 1
    elapsed = time.perf_counter() - start
    print(f"fuzz_differential: {counts['cases']} cases (seeds {args.seed}..{seed - 1}) in "
          f"{elapsed:.0f} s: {counts['matched']} matched the reference, "
          f"{counts['failures']} failures ({len(kinds)} kinds)")
    for key, n in kinds.most_common():
        s, problem = first[key]
        print(f"  {n:6d}  {key}\n          first seed {s}: {problem.splitlines()[0][:200]}")
        print(f"          seeds: {' '.join(map(str, seeds[key][:20]))}")
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
