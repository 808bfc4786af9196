"""Queueing a 100-member sweep on Slurm, against plain sbatch of the same array, alternating in one run.

    mltrain -m job=command job.command=true compute=slurm '+job.params.i=range(0,100)' --detach
    sbatch --array=0-99 (a batch script whose task runs `srun true`)

Both from an empty folder, each started on an idle queue (the previous arm's tasks drained first, not
timed), median of N pairs. Reported per arm: the wall until the command returns; for mltrain also the
CPU it used (user+sys, its own and its children's: far steadier than the wall on a shared machine) and
where the wall went, from when each kind of line first and last appeared on its output:

    start -> 1st run folder   Python, Hydra, composing and freezing the 100 members
    run folders               creating the 100 run folders (config, job.json, run.json, snapshot)
    Preparing                 the environment made ready, each member's Preparing
    sbatch                    submitit's one array submission (from the last Preparing to the first Queued)
    Queued                    each member's job id written
    -> exit                   the rest: the summary, the command's exit

The ratio to sbatch grows with mltrain's fixed work; the targets are the wall (<= 3 s) and the CPU.
MLTRAIN_TRACKING=off: the MLflow mirror started after the command would otherwise run into the next arm.

Figures (2026-11-25, the project's 2-core machine, shared with two other sessions' tests: load 7-11 during
the runs, so the walls are 2-3x what an idle machine gives; CPU and the phases after the run folders are
the comparable part; --against b8d5f3d, the code before this benchmark's fixes, alternating):
                            after     before (b8d5f3d)
    mltrain CPU             2.39 s    2.55 s     (user+sys, the package listing's process included)
    start -> 1st run folder 4.28 s    3.74 s     (unchanged code: Python, Hydra, composing, freezing)
    run folders             0.77 s    0.58 s
    Preparing               0.42 s    0.67 s     (was: 3 run.json writes and a listing thread per member)
    sbatch                  0.11 s    0.03 s
    Queued                  0.18 s    0.36 s     (was: 2 writes per member, Queued then detached)
    -> exit                 0.03 s    0.46 s
    wall                    6.26 s    5.93 s     (load 11; 3.22 s in a run at load 2-9)
    plain sbatch --array    0.01 s
Not counted by either: the MLflow mirror the command used to start for the 100 queued members (about 7.7 s of
CPU in the 30 s after it returned on this machine), which a second sweep queued right after ran into.
Usage: .venv/bin/python benchmarks/bench_slurm_sweep.py [--repeats 3] [--members 100]
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

BIN = Path(sys.executable).parent
KINDS = (("run folders", re.compile(r"\] run ")), ("Preparing", re.compile(r"\] Preparing$")),
         ("Queued", re.compile(r"\] Queued: submitted")))


def drain(env: dict, limit_s: float = 300) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        out = subprocess.run(["squeue", "-h", "-o", "%A"], env=env, capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(0.5)
    raise SystemExit("the queue did not drain")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def mltrain_argv(source: Optional[str]) -> List[str]:
    """The installed mltrain, or the one of a source tree (`git archive REV mltrain launchers conf`)."""
    if source is None:
        return [str(BIN / "mltrain")]
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'mltrain'; from mltrain.cli.main import entry; entry()"]


def run_mltrain(cwd: Path, env: dict, members: int, source: Optional[str] = None) -> dict:
    if source is not None:
        env = {**env, "PYTHONPATH": f"{source}{os.pathsep}{Path(source) / 'launchers'}"}
    cpu0 = children_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen([*mltrain_argv(source), "-m", "job=command", "job.command=true", "compute=slurm",
                             f"+job.params.i=range(0,{members})", "--detach"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first: dict = {}
    last: dict = {}
    for line in proc.stdout:  # type: ignore[union-attr]
        now = time.perf_counter() - t0
        for kind, pattern in KINDS:
            if pattern.search(line.rstrip("\n")):
                first.setdefault(kind, now)
                last[kind] = now
    if proc.wait() != 0:
        raise SystemExit("mltrain failed")
    wall = time.perf_counter() - t0
    cpu = children_cpu() - cpu0
    return {"wall": wall, "cpu": cpu,
            "start -> 1st run folder": first["run folders"],
            "run folders": last["run folders"] - first["run folders"],
            "Preparing": last["Preparing"] - last["run folders"],
            "sbatch": first["Queued"] - last["Preparing"],
            "Queued": last["Queued"] - first["Queued"],
            "-> exit": wall - last["Queued"]}


def run_sbatch(work: Path, env: dict, members: int, i: int) -> dict:
    script = work / f"array{i}.sh"
    script.write_text(f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=1\n"
                      f"#SBATCH --array=0-{members - 1}%256\n#SBATCH --output={work}/sb{i}_%a.out\n"
                      f"srun --kill-on-bad-exit=1 true\n")
    t0 = time.perf_counter()
    subprocess.run(["sbatch", "--parsable", str(script)], cwd=work, env=env, check=True, capture_output=True)
    return {"wall": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--against", metavar="SOURCE", help="also time mltrain from this source tree (an earlier "
                    "revision: git archive REV mltrain launchers conf | tar -x -C SOURCE), alternating")
    args = ap.parse_args()
    if not os.environ.get("SLURM_CONF"):
        raise SystemExit("needs a Slurm cluster: bash scripts/slurm_cluster.sh start; source its env.sh")
    work = Path(tempfile.mkdtemp(prefix="bench-slurm-sweep-"))
    empty = work / "empty"
    empty.mkdir()
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off"}
    ours, theirs, earlier = [], [], []
    for i in range(args.repeats):
        drain(env)
        ours.append(run_mltrain(empty, env, args.members))
        drain(env)
        theirs.append(run_sbatch(work, env, args.members, i))
        if args.against:
            drain(env)
            earlier.append(run_mltrain(empty, env, args.members, args.against))
    drain(env)
    print(f"{args.members}-member sweep queued, median of {args.repeats} alternating pairs ({time.strftime('%Y-%m-%d')}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    for key in ours[0]:
        against = f"   (against: {statistics.median(r[key] for r in earlier):5.2f} s)" if earlier else ""
        print(f"  mltrain {key:<26} {statistics.median(r[key] for r in ours):7.2f} s{against}")
    m, s = statistics.median(r["wall"] for r in ours), statistics.median(r["wall"] for r in theirs)
    print(f"  plain sbatch --array               {s:7.2f} s")
    print(f"  wall ratio mltrain / sbatch        {m / s:7.1f}   (mltrain wall target <= 3 s: {'met' if m <= 3 else 'NOT met'})")


if __name__ == "__main__":
    main()
