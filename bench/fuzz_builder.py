"""Long run of the builder fuzzer (tests/builder_fuzzer.py; tests/test_fuzz_builder.py is the
CI-sized run).

Builds random computations from consecutive seeds until --cases or --seconds runs out, and
prints the counts: cases tried, computations built (module verified), builder calls made, calls
that raised ShapeError, and failures (anything else escaping, or a built module that does not
verify), grouped by where they came from, each with the first seed that shows it. Replay one
with `--seed SEED --cases 1 -v`.

    python bench/fuzz_builder.py --seconds 600
    python bench/fuzz_builder.py --cases 20000 --garbage 0.2
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from builder_fuzzer import RandomSource, run_case  # noqa: E402


def _key(failure: str) -> str:
    """A failure's kind: its first line's head and the innermost frame in the package."""
    lines = failure.split("\n")
    frames = [ln.strip() for ln in lines if ln.strip().startswith("File ") and "/tests/" not in ln]
    return f"{lines[0].split(':')[0][:80]} @ {frames[-1] if frames else '-'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=None, help="number of cases (default: no limit)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="stop after this long (default 60 unless --cases is given)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--steps", type=int, default=8, help="most builder calls per case")
    parser.add_argument("--garbage", type=float, default=0.03,
                        help="how often an argument is of the wrong kind altogether")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case's trace")
    args = parser.parse_args(argv)
    seconds = args.seconds if args.seconds is not None else (None if args.cases else 60.0)

    counts = collections.Counter()
    kinds: collections.Counter[str] = collections.Counter()
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
    print(f"  failures {counts['failures']} ({len(kinds)} kinds)")
    for key, n in kinds.most_common():
        s, failure = first[key]
        print(f"  {n:6d}  {key}\n          first seed {s}: {failure.splitlines()[0][:200]}")
    return 1 if counts["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
