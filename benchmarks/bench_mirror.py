"""What finishing the MLflow mirror before the command returns costs (issue 39, item 1), measured to choose
how: a short script job (20 values logged) with tracking on (the run mirrored into the embedded store by
MLflow's tables written directly, before `mltrain` returns) against the same job with MLTRAIN_TRACKING=off,
alternating; then the mirror program alone on a finished run, against what the same mirror through
MLflow's client would pay before writing a row (importing MLflow and opening the store). Prints medians.

Usage: .venv/bin/python benchmarks/bench_mirror.py [--pairs 9]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench_job_create import timed  # one command to its end, in seconds (this folder is on sys.path)

BIN = Path(sys.executable).parent
SCRIPT = """\
from mltrain import run

for step in range(20):
    run.log("loss", 1.0 / (step + 1), step=step)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=9)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "train.py").write_text(SCRIPT)
        home = Path(tmp, "home")
        on = {**os.environ, "MLTRAIN_HOME": str(home), "MLTRAIN_TRACKING": "on"}
        off = {**on, "MLTRAIN_TRACKING": "off"}
        job = [str(BIN / "mltrain"), "job=script", "job.script=train.py"]
        timed(job, tmp, on)  # the store and the run template exist from here on, as on any machine after its first run
        tracked, untracked = [], []
        for _ in range(a.pairs):
            tracked.append(timed(job, tmp, on))
            untracked.append(timed(job, tmp, off))
        last = max((home / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        mirror = [str(BIN / "python"), "-m", "mltrain.tracking.mirroring", str(last)]
        client = [str(BIN / "python"), "-c", "from mlflow import MlflowClient; "
                  f"MlflowClient(tracking_uri='sqlite:///{home / 'mlflow.db'}').search_experiments(max_results=1)"]
        direct, through_mlflow = [], []
        for _ in range(a.pairs):
            direct.append(timed(mirror, tmp, on))
            through_mlflow.append(timed(client, tmp, on))
    t, u = statistics.median(tracked), statistics.median(untracked)
    d, m = statistics.median(direct), statistics.median(through_mlflow)
    print(f"script job, tracking on (mirrored before return): {t:.2f} s; tracking off: {u:.2f} s; "
          f"ratio {t / u:.2f} (+{t - u:.2f} s), median of {a.pairs} alternating pairs")
    print(f"mirror program, direct writer: {d:.2f} s; MLflow's client before its first row: {m:.2f} s "
          f"(ratio {d / m:.2f})")


if __name__ == "__main__":
    main()
