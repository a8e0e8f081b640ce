"""Two replicas of a long sequential computation (a while loop on a small array, which
no pass parallelizes) against one: about 1.0 when they really run in parallel, 2.0 when
serialized. Best of three; run it on an idle machine.

    cd bench && ../.venv/bin/python replica_concurrency.py
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from test_replica_concurrency import spin  # noqa: E402

import xlamlir as xm  # noqa: E402


def best_of(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    comp = spin(40_000_000)
    one, two = xm.compile(comp, num_replicas=1), xm.compile(comp, num_replicas=2)
    x = np.ones(16, np.float32)
    expected = one.execute_replicated([[x]])[0]
    np.testing.assert_allclose(two.execute_replicated([[x], [x]])[0], 2 * expected, rtol=1e-6)
    t1 = best_of(3, lambda: one.execute_replicated([[x]]))
    t2 = best_of(3, lambda: two.execute_replicated([[x], [x]]))
    print(f"one replica {t1 * 1e3:.1f} ms, two {t2 * 1e3:.1f} ms: ratio {t2 / t1:.2f} "
          "(1.0 = parallel, 2.0 = serialized)")


if __name__ == "__main__":
    main()
