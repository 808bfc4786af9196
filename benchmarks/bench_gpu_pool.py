"""8 one-GPU trials of a fixed length on 4 devices, 4 at a time: how close mltrain's GPU pool comes to the ideal
(2 rounds), against what a user would otherwise run.

No GPU is needed: the four devices are declared (CUDA_VISIBLE_DEVICES=0,1,2,3), and each trial stands for a job
that keeps its GPU busy: it holds an exclusive lock named after the device it was given for its whole length,
so two trials given the same device run one after the other, as two jobs that each fill a GPU do.

Arms, alternating in each round:
- mltrain: `mltrain -m job=command ... compute.gpus=1 compute.max_concurrent_jobs=4 '+job.params.i=range(0,8)'`;
- xargs round-robin: the hand-written peer, `xargs -P 4` with CUDA_VISIBLE_DEVICES=$((i % 4)) per trial (it works
  here only because every trial has the same length; a user has to write it);
- all on device 0: what mltrain gave every run before the pool (and what submitit's and Hydra's local launchers
  give: hydra #2757, submitit #1704), the same xargs with CUDA_VISIBLE_DEVICES=0.
Usage: python benchmarks/bench_gpu_pool.py [--trial-s 2] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

TRIAL = """\
import fcntl, os, sys, time
device = os.environ.get("CUDA_VISIBLE_DEVICES", "")
with open(os.path.join(sys.argv[1], f"device-{device}.lock"), "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)  # the device is busy for the trial's whole length
    time.sleep(float(sys.argv[2]))
"""


def mltrain_cmd() -> List[str]:
    exe = shutil.which("mltrain", path=str(Path(sys.executable).parent)) or shutil.which("mltrain")
    return [exe] if exe else [sys.executable, "-m", "mltrain"]


def timed(argv: List[str], cwd: Path, env: Dict[str, str]) -> float:
    t0 = time.monotonic()
    subprocess.run(argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--trial-s", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-gpu-pool-"))
    work = root / "project"  # the job's source folder: only the trial, so a run's snapshot is one small file
    work.mkdir()
    (work / "trial.py").write_text(TRIAL)
    locks = root / "locks"
    locks.mkdir()
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3", "MLTRAIN_TRACKING": "off"}
    command = f"{sys.executable} trial.py {locks} {a.trial_s}"

    def by_hand(device: str) -> List[str]:
        return ["bash", "-c", f"seq 0 7 | xargs -P 4 -I{{}} bash -c 'CUDA_VISIBLE_DEVICES={device} {command}'"]

    arms = {
        "mltrain": lambda: mltrain_cmd() + ["-m", "job=command", f"job.command={command}", "job.source_directory=.",
                                            "compute.gpus=1", "compute.max_concurrent_jobs=4", "run.system_metrics=false",
                                            "+job.params.i=range(0,8)"],
        "xargs round-robin": lambda: by_hand("$(({} % 4))"),
        "all on device 0": lambda: by_hand("0"),
    }
    times: Dict[str, List[float]] = {k: [] for k in arms}
    for r in range(a.rounds):
        order = list(arms) if r % 2 == 0 else list(reversed(arms))
        for name in order:
            home = root / f"home-{name.split()[0]}-{r}"  # outside the project: never in a snapshot
            times[name].append(timed(arms[name](), work, {**env, "MLTRAIN_HOME": str(home)}))
    ideal = 2 * a.trial_s
    print(f"8 trials of {a.trial_s:.1f} s on 4 declared devices, 4 at a time; ideal {ideal:.2f} s (2 rounds); "
          f"medians of {a.rounds}, alternating")
    for name, values in times.items():
        m = statistics.median(values)
        print(f"  {name:18s} {m:6.2f} s  = {m / ideal:.2f} x ideal   ({', '.join(f'{v:.2f}' for v in values)})")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
