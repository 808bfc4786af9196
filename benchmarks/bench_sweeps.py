"""What early termination saves: one designed HyperDrive sweep (8 members whose learning curves rise
to different ceilings, 10 epochs each of real CPU work), run with no policy and with each of Azure
ML's policies, alternating, on the local backend.

Reports per policy: member-epochs spent (values logged), CPU-seconds of the members' processes
(from their run records' phases: seconds Running), wall time, and whether the sweep found the same
best member as the sweep without a policy.
Usage: .venv/bin/python benchmarks/bench_sweeps.py [--repeats 2] [--epoch-s 0.25]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
CEILINGS = "0.5,0.6,0.7,0.75,0.8,0.85,0.9,0.95"
POLICIES = {
    "none": [],
    "bandit": ["sweep.early_termination.policy=bandit", "sweep.early_termination.slack_factor=0.1",
               "sweep.early_termination.delay_evaluation=2"],
    "median_stopping": ["sweep.early_termination.policy=median_stopping", "sweep.early_termination.delay_evaluation=2"],
    "truncation_selection": ["sweep.early_termination.policy=truncation_selection",
                             "sweep.early_termination.truncation_percentage=25",
                             "sweep.early_termination.delay_evaluation=2"],
}


def sweep(work: Path, policy: str, epoch_s: float) -> dict:
    home = work / f"home-{policy}"
    shutil.rmtree(home, ignore_errors=True)
    env = {**os.environ, "MLTRAIN_HOME": str(home)}
    start = time.perf_counter()
    subprocess.run([str(BIN / "mltrain"), "-m", "job=script", f"job.source_directory={HERE / 'assets'}",
                    "job.script=learning_curve.py", f"job.arguments=[--ceiling,$AML_PARAMETER_ceiling,--epoch-s,{epoch_s}]",
                    f"+job.params.ceiling=choice({CEILINGS})", "sweep.primary_metric=accuracy", "sweep.seed=1",
                    "sweep.max_concurrent_runs=2", "run.console=none", *POLICIES[policy]],
                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    doc = json.loads(next((home / "runs" / "_sweeps").glob("*/sweep.json")).read_text())
    running = 0.0
    for m in doc["members"]:
        phases = json.loads((Path(m["run_dir"]) / "run.json").read_text())["phases"]
        running += max(phases.values()) - phases["Running"]
    return {"epochs": sum(m["intervals"] for m in doc["members"]), "member_s": running, "wall_s": wall,
            "best": doc["best_params"]["+job.params.ceiling"], "cut": sum(m["status"] == "Canceled" for m in doc["members"])}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--epoch-s", type=float, default=0.25)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-sweeps-"))
    results = {name: [] for name in POLICIES}
    for _ in range(a.repeats):
        for name in POLICIES:  # alternating: every policy sees the same machine state in turn
            results[name].append(sweep(work, name, a.epoch_s))
    base = results["none"]
    base_epochs = statistics.median(r["epochs"] for r in base)
    base_s = statistics.median(r["member_s"] for r in base)
    best = base[0]["best"]
    print(f"8 members x 10 epochs of {a.epoch_s}s CPU, 2 at a time, median of {a.repeats}; best without a policy: "
          f"ceiling {best}")
    print(f"{'policy':<22} {'members cut':>11} {'member-epochs':>14} {'ratio':>6} {'member-s':>9} {'ratio':>6} "
          f"{'wall-s':>7} {'same best':>9}")
    for name, rows in results.items():
        epochs = statistics.median(r["epochs"] for r in rows)
        member_s = statistics.median(r["member_s"] for r in rows)
        print(f"{name:<22} {statistics.median(r['cut'] for r in rows):>11.0f} {epochs:>14.0f} {epochs / base_epochs:>6.2f} "
              f"{member_s:>9.1f} {member_s / base_s:>6.2f} {statistics.median(r['wall_s'] for r in rows):>7.1f} "
              f"{'yes' if all(r['best'] == best for r in rows) else 'NO':>9}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
