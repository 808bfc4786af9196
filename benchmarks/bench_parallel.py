"""Batch scoring of many small files with a trivial run(): mltrain's parallel job against what a user would
otherwise write, a `multiprocessing.Pool` over the same files and the same function, its rows written to one
file in input order.

Arms, alternating in each round, each a fresh process from start to end (the Pool's script is what a user would
run with `python`; mltrain's is `mltrain job=parallel ...`, its driver, agent, workers and records):
- Pool: `Pool(W).imap(run, chunks of B files)`, rows appended in order to one file;
- mltrain: `job.max_concurrency_per_instance=W job.mini_batch_size=B`, the same entry script;
- on Slurm (--slurm, a cluster's SLURM_CONF in the environment): the Pool script inside one `sbatch --wait` job,
  and under `srun` (which returns as the job ends; sbatch --wait polls its state seconds apart), against mltrain
  with `compute=slurm distribution.node_count=N` (N instances of W workers each; the Pool arms get N*W processes
  on one node).
With `--slope` (local only) each round also runs 10 files in every arm, and a command job
(`mltrain job=command job.command=true`, the same fixed start without the engine): the fixed start is mltrain's
10-file wall against the command job's, and each arm's time per file its (N-file wall - 10-file wall) / (N - 10),
so that a cost per file is told apart from the start a Pool's 0.2-s run cannot hide. `--baseline SITE` adds an arm
of mltrain installed in SITE (`pip install --no-deps --target SITE`), put first on PYTHONPATH: before and after in
the same rounds. `--check` exits 1 when the per-file ratio (mltrain's slope over the Pool's) is above
`--max-slope-ratio` (2.0) or the fixed start above `--max-start-ratio` (1.1) x the command job's (issue 66).

Usage: python benchmarks/bench_parallel.py [--files 10000] [--workers 2] [--batch 10] [--work-ms 0] [--rounds 3]
       [--slurm N] [--slope] [--baseline SITE] [--check]
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
from typing import Callable, Dict, List

SCORE = """\
import os, time
WORK_S = float(os.environ.get("BENCH_WORK_MS", "0")) / 1000
def init():
    pass
def run(mini_batch):
    if WORK_S:
        time.sleep(WORK_S * len(mini_batch))  # the model's time per item (a GPU, a service), off the CPU
    return [f"{os.path.basename(p)} {len(open(p).read())}" for p in mini_batch]
"""

POOL = """\
import os, sys
from multiprocessing import Pool
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import score
data, out, workers, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = sorted(os.path.join(data, f) for f in os.listdir(data))
chunks = [files[i:i + batch] for i in range(0, len(files), batch)]
if __name__ == "__main__":
    with Pool(workers, initializer=score.init) as pool, open(out, "w") as f:
        for rows in pool.imap(score.run, chunks):
            f.writelines(r + "\\n" for r in rows)
"""


def mltrain_cmd() -> List[str]:
    exe = shutil.which("mltrain", path=str(Path(sys.executable).parent)) or shutil.which("mltrain")
    return [exe] if exe else [sys.executable, "-m", "mltrain"]


def timed(argv: List[str], cwd: Path, env: Dict[str, str]) -> float:
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"{argv[0]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return time.monotonic() - t0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=10000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--work-ms", type=float, default=0.0, help="each item's scoring time (slept)")
    p.add_argument("--slurm", type=int, default=0, help="instances on the Slurm cluster of $SLURM_CONF (0: local)")
    p.add_argument("--slope", action="store_true", help="also 10 files and a command job: fixed start and per file")
    p.add_argument("--baseline", help="an arm of mltrain installed in this folder (before/after in one run)")
    p.add_argument("--check", action="store_true", help="exit 1 above the per-file or fixed-start target")
    p.add_argument("--max-slope-ratio", type=float, default=2.0)
    p.add_argument("--max-start-ratio", type=float, default=1.1)
    a = p.parse_args()
    if a.check:
        a.slope = True
    root = Path(tempfile.mkdtemp(prefix="bench-parallel-", dir=os.environ.get("BENCH_DIR")))
    work = root / "project"
    work.mkdir()
    (work / "score.py").write_text(SCORE)
    (work / "pool_score.py").write_text(POOL)
    sizes = [a.files] + ([10] if a.slope and not a.slurm else [])
    for n in sizes:
        (root / f"data{n}").mkdir()
        for i in range(n):
            (root / f"data{n}" / f"f{i:06d}.txt").write_text(f"item {i}\n")
    env = {**os.environ, "MLTRAIN_TRACKING": "off", "BENCH_WORK_MS": str(a.work_ms)}
    nodes = max(1, a.slurm)
    pool_workers = a.workers * nodes

    def pool(n: int) -> List[str]:
        return [sys.executable, "pool_score.py", str(root / f"data{n}"), str(root / "pool_out.txt"), str(pool_workers),
                str(a.batch)]

    arms: Dict[str, Callable[[int], List[str]]] = {"Pool": pool}
    if a.slurm:  # sbatch --wait polls the job's state (seconds apart); srun returns as the job ends
        arms = {"Pool in sbatch": lambda n: ["sbatch", "--wait", "--quiet", "-N", "1", "-c", str(pool_workers), "-o",
                                             str(root / "pool.log"), "--wrap", " ".join(pool(n))],
                "Pool in srun": lambda n: ["srun", "--quiet", "-N", "1", "-c", str(pool_workers), *pool(n)]}

    def mltrain(n: int) -> List[str]:
        argv = mltrain_cmd() + ["job=parallel", "job.source_directory=.", "job.entry_script=score.py",
                                f"job.input_data={root / f'data{n}'}", f"job.mini_batch_size={a.batch}",
                                f"job.max_concurrency_per_instance={a.workers}", "run.system_metrics=false"]
        if a.slurm:
            argv += ["compute=slurm", "compute.poll_s=0.2", f"distribution.node_count={nodes}"]
        return argv

    arms["mltrain"] = mltrain
    sites: Dict[str, str] = {}
    if a.baseline:
        arms["mltrain (baseline)"] = mltrain
        sites["mltrain (baseline)"] = str(Path(a.baseline).resolve())
    command = mltrain_cmd() + ["job=command", "job.command=true", "job.source_directory=.", "run.system_metrics=false"]
    times: Dict[str, Dict[int, List[float]]] = {k: {n: [] for n in sizes} for k in arms}
    starts: List[float] = []
    for r in range(a.rounds):
        for name in (list(arms) if r % 2 == 0 else list(reversed(arms))):
            for n in sizes:
                home = root / f"home-{name}-{r}-{n}"  # outside the project: never in a snapshot
                arm_env = {**env, "MLTRAIN_HOME": str(home)}
                if name in sites:
                    arm_env["PYTHONPATH"] = os.pathsep.join([sites[name], env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
                times[name][n].append(timed(arms[name](n), work, arm_env))
        if a.slope and not a.slurm:
            starts.append(timed(command, work, {**env, "MLTRAIN_HOME": str(root / f"home-command-{r}")}))
    where = f"Slurm, {nodes} instance(s) x {a.workers} workers" if a.slurm else f"this machine, {a.workers} workers"
    print(f"{a.files} files, mini-batches of {a.batch}, {a.work_ms:g} ms per item, {where}; medians of {a.rounds}, "
          f"alternating ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at the end)")
    first = next(iter(times))
    base = statistics.median(times[first][a.files])
    for name, by_size in times.items():
        m = statistics.median(by_size[a.files])
        print(f"  {name:18s} {m:6.2f} s  = {m / base:.2f} x {first}   ({', '.join(f'{v:.2f}' for v in by_size[a.files])})")
    failed = []
    if a.slope and not a.slurm:
        command_s = statistics.median(starts)
        slopes = {name: (statistics.median(by_size[a.files]) - statistics.median(by_size[10])) / (a.files - 10)
                  for name, by_size in times.items()}
        print("  10 files:  " + ", ".join(f"{name} {statistics.median(by_size[10]):.2f} s" for name, by_size in times.items())
              + f"; a command job {command_s:.2f} s ({', '.join(f'{v:.2f}' for v in starts)})")
        start_ratio = statistics.median(times["mltrain"][10]) / command_s
        slope_ratio = slopes["mltrain"] / slopes[first] if slopes[first] > 0 else float("inf")
        print("  per file:  " + ", ".join(f"{name} {1000 * v:.3f} ms" for name, v in slopes.items()))
        print(f"  per-file ratio mltrain / {first}: {slope_ratio:.2f} (target <= {a.max_slope_ratio:g}); "
              f"fixed start mltrain (10 files) / command job: {start_ratio:.2f} (target <= {a.max_start_ratio:g})")
        if slope_ratio > a.max_slope_ratio:
            failed.append(f"per-file ratio {slope_ratio:.2f} > {a.max_slope_ratio:g}")
        if start_ratio > a.max_start_ratio:
            failed.append(f"fixed start ratio {start_ratio:.2f} > {a.max_start_ratio:g}")
    shutil.rmtree(root, ignore_errors=True)
    if a.check and failed:
        sys.exit("above target: " + "; ".join(failed))


if __name__ == "__main__":
    main()
