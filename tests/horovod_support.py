"""Horovod for the tests: built by the test command (`mltrain horovod build`); outside CI a missing
Horovod skips with one line, under CI (MLTRAIN_REQUIRE_HOROVOD=1) it fails."""
from __future__ import annotations

import subprocess
import sys

from mpi_support import require_mpi
from support import require


def horovod_problem() -> str | None:
    probe = subprocess.run([sys.executable, "-c", "import horovod.torch as hvd; assert hvd.mpi_built()"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return "Horovod is not installed: run `mltrain horovod build` (scripts/test.sh does)"
    return None


def require_horovod() -> None:
    require_mpi()
    require(horovod_problem(), "MLTRAIN_REQUIRE_HOROVOD", "Horovod")
