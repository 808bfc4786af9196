"""A plain Hydra app's sweep on the test Slurm cluster, end to end: `hydra/launcher=mltrain_slurm`
against `hydra/launcher=submitit_slurm` (hydra-submitit-launcher), same app, same sweep, alternating
pairs in one run. Each side's time is the whole command: composing, submitting one job array,
running the members, collecting their results. mltrain also writes a run record, per-rank logs and
fail-fast per member; submitit's launcher does not.

Usage: .venv/bin/python benchmarks/bench_hydra_slurm.py [--pairs 7] [--members 10]
(needs SLURM_CONF: scripts/slurm_cluster.sh; pip install 'mltrain[bench]')
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
APP = HERE / "assets" / "sweep_app.py"


def run(launcher: str, work: Path, env: dict, members: int, i: int) -> float:
    cmd = [sys.executable, str(APP), "-m", f"x=range(0,{members})", f"hydra/launcher={launcher}",
           f"hydra.sweep.dir={work}/{launcher}_{i}", "hydra.launcher.timeout_min=10"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"{launcher} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    return elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--pairs", type=int, default=7)
    p.add_argument("--members", type=int, default=10)
    a = p.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("no SLURM_CONF: start a cluster with scripts/slurm_cluster.sh and source its env.sh")
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-hydra-slurm-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    run("mltrain_slurm", work, env, 2, -1)  # warm-up: page cache, Slurm's accounting
    run("submitit_slurm", work, env, 2, -1)
    ml, sb = [], []
    for i in range(a.pairs):
        first, second = (("mltrain_slurm", ml), ("submitit_slurm", sb)) if i % 2 == 0 else \
            (("submitit_slurm", sb), ("mltrain_slurm", ml))
        for launcher, times in (first, second):
            times.append(run(launcher, work, env, a.members, i))
    ratios = [m / s for m, s in zip(ml, sb)]
    print(f"{a.members}-member Hydra sweep on Slurm, end to end, {a.pairs} alternating pairs:")
    print(f"  mltrain_slurm  median {statistics.median(ml):.2f}s  {[round(x, 2) for x in ml]}")
    print(f"  submitit_slurm median {statistics.median(sb):.2f}s  {[round(x, 2) for x in sb]}")
    print(f"  ratio mltrain/submitit: median of pairs {statistics.median(ratios):.2f}  "
          f"(pairs {[round(r, 2) for r in ratios]}; target < 1.0)")


if __name__ == "__main__":
    main()
