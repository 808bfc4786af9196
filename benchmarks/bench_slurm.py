"""Slurm submission, measured on a real cluster in one run (needs SLURM_CONF: scripts/slurm_cluster.sh):

1. submit-to-all-ranks-running of a 2-rank job: `mltrain compute=slurm` against a plain `sbatch` of
   an equivalent batch script (srun, 2 tasks); the time from the command's start until the last rank
   has started its program (median of N alternating runs);
2. the wall time of submitting a 100-member sweep (`mltrain -m ... compute=slurm --detach`), one array.

Usage: .venv/bin/python benchmarks/bench_slurm.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
MARKS = {"trivial": "mark_start.py", "imports torch": "mark_start_torch.py"}


def wait_marks(folder: Path, n: int, timeout: float = 120) -> float:
    deadline = time.time() + timeout
    while time.time() < deadline:
        texts = [m.read_text().strip() for m in folder.glob("start_*")]
        if len(texts) == n and all(texts):  # a marker may be caught while it is being written
            return max(float(t) for t in texts)
        time.sleep(0.02)
    raise SystemExit(f"ranks did not start within {timeout}s in {folder}")


def run_mltrain(work: Path, env: dict, i: int, mark: str) -> float:
    marks = work / f"ml{i}{mark}"
    marks.mkdir()
    t0 = time.time()
    proc = subprocess.Popen([str(BIN / "mltrain"), "job=script", f"job.source_directory={HERE / 'assets'}",
                             f"job.script={mark}", f"job.arguments=[{marks}]", "compute=slurm",
                             "compute.poll_s=0.2", "distribution=pytorch", "distribution.process_count_per_node=2"],
                            cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = wait_marks(marks, 2)
    proc.wait()
    return started - t0


def run_sbatch(work: Path, env: dict, i: int, mark: str) -> float:
    marks = work / f"sb{i}{mark}"
    marks.mkdir()
    script = work / f"job{i}{mark}.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=2\n#SBATCH --cpus-per-task=1\n"
                      f"#SBATCH --output={work}/sb{i}.out\n"
                      f"srun --kill-on-bad-exit=1 {sys.executable} -u {HERE / 'assets' / mark} {marks}\n")
    t0 = time.time()
    subprocess.run(["sbatch", "--parsable", str(script)], check=True, env=env, capture_output=True)
    return wait_marks(marks, 2) - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("no SLURM_CONF: start a cluster with scripts/slurm_cluster.sh and source its env.sh")
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-slurm-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    for label, mark in MARKS.items():
        ml, sb = [], []
        for i in range(a.repeats):
            ml.append(run_mltrain(work, env, i, mark))
            sb.append(run_sbatch(work, env, i, mark))
        m, s = statistics.median(ml), statistics.median(sb)
        print(f"submit -> 2 ranks running ({label} rank program): mltrain {m:.2f}s  plain sbatch {s:.2f}s  "
              f"ratio {m / s:.2f}  (target <= 1.5)")

    t0 = time.perf_counter()
    subprocess.run([str(BIN / "mltrain"), "-m", "job=command", "job.command=true", f"job.source_directory={HERE / 'assets'}",
                    "compute=slurm", "+job.params.i=range(0,100)", "--detach"],
                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    sweep = time.perf_counter() - t0
    subprocess.run(["scancel", "--name=command"], env=env, check=False)
    print(f"100-member sweep submitted as one array in {sweep:.2f}s  (target <= 3 s)")


if __name__ == "__main__":
    main()
