"""Where the time of a 3-step pipeline on Slurm goes: mltrain's chain against the same three jobs chained
by hand with `sbatch --dependency=afterok`, phase by phase (the chain and scripts of bench_pipelines.py).

For each launcher, alternating, each pair started at the same point of the wall-clock second (N points spread
over it: Slurm allocates once a second, bench_pipelines.at_phase), median of N:
  start -> 1st submit   from the command's start until the first step is queued (mltrain: Hydra, composing,
                        freezing and snapshotting every step; by hand: nothing)
  step k wait           from the previous step's end (or the submit) until step k's program starts
                        (Slurm's dependency release and scheduling, the task's own Python start)
  step k run            the step's program, start to end
  last end -> return    until the command returns (mltrain) or the output is seen (by hand)

Times come from the steps themselves: each program writes time.time() when it starts and ends, so both
chains are read the same way. Usage: .venv/bin/python benchmarks/profile_pipeline_slurm.py [--repeats 7]
(needs SLURM_CONF: scripts/slurm_cluster.sh). `--previous-site DIR`: a third arm, the mltrain installed in DIR
(`pip install --no-deps --target DIR <an earlier checkout>`, put first on PYTHONPATH), in the same rounds.
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

sys.path.insert(0, str(Path(__file__).parent))
import bench_pipelines as chain  # noqa: E402 - the same chain and scripts as the benchmark

BIN = Path(sys.executable).parent
STAMP = ("import time, os, sys, pathlib\n"
         "_stamps = pathlib.Path(os.environ['STAMPS'])\n"
         "_name = pathlib.Path(sys.argv[0]).stem\n"
         "with open(_stamps, 'a') as _f: _f.write(f'{_name} start {time.time()}\\n')\n"
         "import atexit\n"
         "atexit.register(lambda: open(_stamps, 'a').write(f'{_name} end {time.time()}\\n'))\n")


def project(work: Path) -> Path:
    proj = chain.project(work)
    for name in chain.STEPS:
        path = proj / name
        path.write_text(STAMP + path.read_text())
    return proj


def stamps(path: Path) -> dict:
    out: dict = {}
    for line in path.read_text().splitlines():
        name, what, value = line.split()
        # the 2-rank step: its first rank's start, its last rank's end
        key = (name, what)
        out[key] = min(out.get(key, 1e20), float(value)) if what == "start" else max(out.get(key, 0), float(value))
    return out


def phases(t0: float, submitted: float, marks: dict, returned: float) -> dict:
    names = ["prep", "train", "score"]
    row = {"start -> 1st submit": submitted - t0}
    previous = submitted
    for name in names:
        row[f"{name} wait"] = marks[(name, "start")] - previous
        row[f"{name} run"] = marks[(name, "end")] - marks[(name, "start")]
        previous = marks[(name, "end")]
    row["last end -> return"] = returned - previous
    row["total"] = returned - t0
    return row


def run_mltrain(proj: Path, env: dict, work: Path, i: int, site: str = "") -> dict:
    stamp_file = work / f"ml{'prev' if site else ''}{i}.stamps"
    env = {**env, "STAMPS": str(stamp_file)}
    if site:
        env["PYTHONPATH"] = site
    t0 = time.time()
    proc = subprocess.Popen([str(BIN / "mltrain"), "pipeline=chain", "compute=slurm", "--force-rerun"], cwd=proj,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    submitted = None
    for line in proc.stdout:  # type: ignore[union-attr]
        if submitted is None and "submitted as Slurm job" in line:
            submitted = time.time()
    proc.wait()
    returned = time.time()
    return phases(t0, submitted or t0, stamps(stamp_file), returned)


def run_sbatch(proj: Path, env: dict, work: Path, i: int) -> dict:
    stamp_file = work / f"sb{i}.stamps"
    env = {**env, "STAMPS": str(stamp_file)}
    t0 = time.time()
    # bench_pipelines.run_sbatch times until the output exists; the first sbatch returns at once
    chain.run_sbatch(work, proj, env, 1000 + i)
    returned = time.time()
    marks = stamps(stamp_file)
    return phases(t0, t0, marks, returned)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--previous-site", default="")
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("needs a Slurm cluster: bash scripts/slurm_cluster.sh start; source its env.sh")
    work = Path(tempfile.mkdtemp(prefix="profile-pipeline-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "CUDA_VISIBLE_DEVICES": ""}
    proj = project(work)
    subprocess.run([str(BIN / "mltrain"), "pipeline=chain", "compute=slurm"], cwd=proj, check=True,
                   env={**env, "STAMPS": str(work / "warm.stamps")}, stdout=subprocess.DEVNULL)
    ours, theirs, previous = [], [], []
    arms = [(ours, run_mltrain), (theirs, run_sbatch)]
    if args.previous_site:
        site = str(Path(args.previous_site).resolve())
        subprocess.run([str(BIN / "mltrain"), "pipeline=chain", "compute=slurm", "--force-rerun"], cwd=proj, check=True,
                       env={**env, "STAMPS": str(work / "warm.stamps"), "PYTHONPATH": site}, stdout=subprocess.DEVNULL)
        arms.append((previous, lambda *a: run_mltrain(*a, site=site)))
    for i in range(args.repeats):  # each pair at the same point of the second (bench_pipelines.at_phase says why)
        for out, run in arms[i % len(arms):] + arms[:i % len(arms)]:  # the order rotated every round
            chain.at_phase((i + 0.5) / args.repeats)
            out.append(run(proj, env, work, i))
    print(f"{'phase (median of ' + str(args.repeats) + ', seconds)':<34} {'mltrain':>8} {'sbatch':>8}"
          + (f" {'previous':>8}" if previous else ""))
    for key in ours[0]:
        a, b = statistics.median(r[key] for r in ours), statistics.median(r[key] for r in theirs)
        c = f" {statistics.median(r[key] for r in previous):8.2f}" if previous else ""
        print(f"{key:<34} {a:8.2f} {b:8.2f}{c}")
    if previous:
        first = [o["start -> 1st submit"] / p["start -> 1st submit"] for o, p in zip(ours, previous)]
        print(f"median of pair ratios (start -> 1st submit), this / previous: {statistics.median(first):.2f}")
    ratios = [o["total"] / t["total"] for o, t in zip(ours, theirs)]
    print(f"median of pair ratios (total): {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
