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
Usage: python benchmarks/bench_parallel.py [--files 10000] [--workers 2] [--batch 10] [--work-ms 0] [--rounds 3]
       [--slurm N]
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
    a = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-parallel-", dir=os.environ.get("BENCH_DIR")))
    work, data = root / "project", root / "data"
    work.mkdir()
    data.mkdir()
    (work / "score.py").write_text(SCORE)
    (work / "pool_score.py").write_text(POOL)
    for i in range(a.files):
        (data / f"f{i:06d}.txt").write_text(f"item {i}\n")
    env = {**os.environ, "MLTRAIN_TRACKING": "off", "BENCH_WORK_MS": str(a.work_ms)}
    nodes = max(1, a.slurm)
    pool_workers = a.workers * nodes
    pool = [sys.executable, "pool_score.py", str(data), str(root / "pool_out.txt"), str(pool_workers), str(a.batch)]
    arms: Dict[str, Callable[[int], List[str]]] = {"Pool": lambda r: pool}
    if a.slurm:  # sbatch --wait polls the job's state (seconds apart); srun returns as the job ends
        arms = {"Pool in sbatch": lambda r: ["sbatch", "--wait", "--quiet", "-N", "1", "-c", str(pool_workers), "-o",
                                             str(root / "pool.log"), "--wrap", " ".join(pool)],
                "Pool in srun": lambda r: ["srun", "--quiet", "-N", "1", "-c", str(pool_workers), *pool]}
    mltrain = mltrain_cmd() + ["job=parallel", "job.source_directory=.", "job.entry_script=score.py",
                               f"job.input_data={data}", f"job.mini_batch_size={a.batch}",
                               f"job.max_concurrency_per_instance={a.workers}", "run.system_metrics=false"]
    if a.slurm:
        mltrain += ["compute=slurm", "compute.poll_s=0.2", f"distribution.node_count={nodes}"]
    arms["mltrain"] = lambda r: mltrain
    times: Dict[str, List[float]] = {k: [] for k in arms}
    for r in range(a.rounds):
        for name in (list(arms) if r % 2 == 0 else list(reversed(arms))):
            home = root / f"home-{name}-{r}"  # outside the project: never in a snapshot
            times[name].append(timed(arms[name](r), work, {**env, "MLTRAIN_HOME": str(home)}))
    where = f"Slurm, {nodes} instance(s) x {a.workers} workers" if a.slurm else f"this machine, {a.workers} workers"
    print(f"{a.files} files, mini-batches of {a.batch}, {a.work_ms:g} ms per item, {where}; medians of {a.rounds}, "
          "alternating")
    first = next(iter(times))
    base = statistics.median(times[first])
    for name, values in times.items():
        m = statistics.median(values)
        print(f"  {name:15s} {m:6.2f} s  = {m / base:.2f} x {first}   ({', '.join(f'{v:.2f}' for v in values)})")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
