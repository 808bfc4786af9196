"""Open MPI for the tests: skipped with one line where absent, an error under CI (MLTRAIN_REQUIRE_MPI=1)."""
from __future__ import annotations

import shutil
import subprocess
import sys

from support import require


def mpi_problem() -> str | None:
    if shutil.which("mpirun") is None:
        return "no mpirun: install Debian's openmpi-bin (scripts/test.sh does as root)"
    probe = subprocess.run([sys.executable, "-c", "from mpi4py import MPI"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"mpi4py does not load: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def require_mpi() -> None:
    require(mpi_problem(), "MLTRAIN_REQUIRE_MPI", "MPI")
