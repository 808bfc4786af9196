"""Access to the real Slurm cluster the test command starts (scripts/slurm_cluster.sh).

Outside CI, without a cluster, Slurm tests skip with one line; in CI (MLTRAIN_REQUIRE_SLURM=1,
set by scripts/test.sh) a missing cluster is an error, never a skip.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from support import require


def cluster_problem() -> str | None:
    if not shutil.which("sbatch") or not os.environ.get("SLURM_CONF"):
        return "no Slurm cluster: run `bash scripts/slurm_cluster.sh start` and source its env.sh"
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"sinfo failed: {exc}"
    if out.returncode != 0 or not out.stdout.strip():
        return f"Slurm controller not answering: {out.stderr.strip()}"
    return None


def require_cluster() -> None:
    require(cluster_problem(), "MLTRAIN_REQUIRE_SLURM", "Slurm")


def sacct_settles(job_id: str, timeout: float = 30) -> str:
    """The job's state once accounting has a final one. mltrain reports a run Completed from its ranks'
    own reports, which can be a moment before slurmdbd has recorded the job's end."""
    import time

    deadline = time.monotonic() + timeout
    state = sacct(job_id)
    while state in ("PENDING", "RUNNING", "COMPLETING", "") and time.monotonic() < deadline:
        time.sleep(0.2)
        state = sacct(job_id)
    return state


def sacct(job_id: str) -> str:
    out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State"], capture_output=True, text=True)
    return out.stdout.split("\n")[0].split(" ")[0].strip()
