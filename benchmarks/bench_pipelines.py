"""Pipelines, measured in one run (the Slurm part needs SLURM_CONF: scripts/slurm_cluster.sh):

1. A 3-step chain on Slurm (prepare -> a 2-rank step -> score, each a small Python script): `mltrain
   pipeline=chain compute=slurm --force-rerun`, from the command's start until it returns with every step
   done, against what a user writes by hand: three `sbatch --dependency=afterok:<previous>` submissions of
   equivalent batch scripts, timed until the last step's output exists. N rounds, the order of the arms rotated
   every round, every arm of a round started at the same point of the wall-clock second, the rounds' points
   spread evenly over it; mean and median of N. With --previous REV, that revision's mltrain
   (bench_release.install_previous) is a third arm of every round.
2. Reuse: the same pipeline run again with nothing changed (every step reused) against its first run.

Usage: .venv/bin/python benchmarks/bench_pipelines.py [--repeats 5] [--previous REV]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

BIN = Path(sys.executable).parent
STEPS = {
    "prep.py": "import sys, pathlib; pathlib.Path(sys.argv[1], 'data.txt').write_text('1 2 3 4')\n",
    "train.py": ("import os, sys, pathlib\nrank = int(os.environ.get('SLURM_PROCID', os.environ.get('RANK', '0')))\n"
                 "total = sum(float(x) for x in pathlib.Path(sys.argv[1], 'data.txt').read_text().split())\n"
                 "if rank == 0: pathlib.Path(sys.argv[2], 'model.txt').write_text(str(total))\n"),
    "score.py": ("import sys, pathlib\n"
                 "pathlib.Path(sys.argv[2], 'scores.txt').write_text(pathlib.Path(sys.argv[1], 'model.txt').read_text())\n"),
}
PIPELINE = """\
steps:
  prepare:
    overrides: [job=script, job.script=prep.py, 'job.arguments=[${outputs.data}]']
    outputs: [data]
  train:
    overrides: [job=script, job.script=train.py, distribution=pytorch, distribution.process_count_per_node=2,
                'job.arguments=[${inputs.data},${outputs.model}]']
    inputs: {data: prepare.outputs.data}
    outputs: [model]
  score:
    overrides: [job=script, job.script=score.py, 'job.arguments=[${inputs.model},${outputs.scores}]']
    inputs: {model: train.outputs.model}
    outputs: [scores]
"""


def project(work: Path) -> Path:
    proj = work / "proj"
    (proj / "conf" / "pipeline").mkdir(parents=True)
    (proj / "conf" / "pipeline" / "chain.yaml").write_text(PIPELINE)
    for name, text in STEPS.items():
        (proj / name).write_text(text)
    return proj


def run_mltrain(proj: Path, env: dict, *extra: str) -> float:
    t0 = time.time()
    done = subprocess.run([str(BIN / "mltrain"), "pipeline=chain", *extra], cwd=proj, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.time() - t0
    if done.returncode != 0:
        raise SystemExit(f"mltrain pipeline=chain {' '.join(extra)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return took


def afterok_chain(out: Path, steps: List[Tuple[str, int, str]], env: dict) -> List[float]:
    """The chain a user writes by hand: one batch script per (name, tasks, command) in `out`, each queued to wait
    with `--dependency=afterok` for the one before. Returns when each was queued (time.time())."""
    queued: List[float] = []
    previous = None
    for name, tasks, command in steps:
        script = out / f"{name}.sh"
        script.write_text(f"#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node={tasks}\n"
                          f"#SBATCH --cpus-per-task=1\n#SBATCH --output={out}/{name}.out\n"
                          f"srun --kill-on-bad-exit=1 {command}\n")
        dep = [f"--dependency=afterok:{previous}", "--kill-on-invalid-dep=yes"] if previous else []
        previous = subprocess.run(["sbatch", "--parsable", *dep, str(script)], check=True, env=env,
                                  capture_output=True, text=True).stdout.strip().split(";")[0]
        queued.append(time.time())
    return queued


def run_sbatch(work: Path, proj: Path, env: dict, i: int) -> float:
    out = work / f"sb{i}"
    for sub in ("data", "model", "scores"):
        (out / sub).mkdir(parents=True)
    py = sys.executable
    lines = {"prep": (1, f"{py} {proj / 'prep.py'} {out / 'data'}"),
             "train": (2, f"{py} {proj / 'train.py'} {out / 'data'} {out / 'model'}"),
             "score": (1, f"{py} {proj / 'score.py'} {out / 'model'} {out / 'scores'}")}
    t0 = time.time()
    afterok_chain(out, [(name, tasks, command) for name, (tasks, command) in lines.items()], env)
    target = out / "scores" / "scores.txt"
    deadline = time.time() + 300
    while not (target.is_file() and target.read_text()):
        if time.time() > deadline:
            raise SystemExit(f"the sbatch chain did not finish: {out}")
        time.sleep(0.02)
    return time.time() - t0


def at_phase(phase: float) -> None:
    """Sleep until `phase` (0 to 1) of a wall-clock second, at least one second from now.

    slurmctld allocates pending jobs in a pass that runs once a second at a fixed point of the second: its log
    shows every `sched: Allocate` of a run at the same fraction (.874, .875, .877, ...). A job submitted just
    before that point starts up to a second sooner than one submitted just after it, and each step of a
    chain waits for the pass after its parent ends. Run back to back, each launcher started where the other
    had just ended, so each always met the pass at the same point: on 2026-11-27 that gave mltrain 1.23 to
    1.26 x the chain, and 1.46 x with both started at the same ten points of the second. A user starts at
    no particular point, so pairs are started at points spread evenly over the second."""
    now = time.time()
    time.sleep((phase - now % 1.0) % 1.0 + 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--previous", help="a git revision: its mltrain arm beside this tree's, in the same rounds")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-pipelines-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "CUDA_VISIBLE_DEVICES": ""}
    proj = project(work)
    results = {}
    if os.environ.get("SLURM_CONF"):
        arms = {"mltrain": lambda i: run_mltrain(proj, env, "compute=slurm", "--force-rerun"),
                "sbatch": lambda i: run_sbatch(work, proj, env, i)}
        if args.previous:
            from bench_release import install_previous  # the same install of an earlier revision

            old = {**env, "MLTRAIN_HOME": str(work / "home_previous"), "PYTHONPATH": str(install_previous(args.previous))}
            run_mltrain(proj, old, "compute=slurm")
            arms["previous"] = lambda i: run_mltrain(proj, old, "compute=slurm", "--force-rerun")
        run_mltrain(proj, env, "compute=slurm")  # warm-up: the first composition, the page cache
        times: dict = {name: [] for name in arms}
        names = list(arms)
        for i in range(args.repeats):
            phase = (i + 0.5) / args.repeats
            for name in names[i % len(names):] + names[:i % len(names)]:  # the order rotated every round
                at_phase(phase)
                times[name].append(arms[name](i))
        sbatch = times["sbatch"]
        chain = {f"{name}_s": statistics.median(t) for name, t in times.items()}
        for name in (n for n in names if n != "sbatch"):
            chain[f"{name}_ratio"] = statistics.median(times[name]) / statistics.median(sbatch)
            chain[f"{name}_mean_ratio"] = statistics.mean(times[name]) / statistics.mean(sbatch)
            print(f"3-step chain on Slurm: {name} {chain[f'{name}_s']:.2f}s, plain sbatch --dependency "
                  f"{chain['sbatch_s']:.2f}s: ratio {chain[f'{name}_ratio']:.2f} (medians of {args.repeats} rounds, "
                  f"each started at the same point of the second); ratio of means {chain[f'{name}_mean_ratio']:.2f}")
        results["slurm_chain"] = chain
    else:
        print("no SLURM_CONF: the Slurm comparison is skipped")
    first, again = [], []
    for _ in range(args.repeats):
        first.append(run_mltrain(proj, env, "--force-rerun"))
        again.append(run_mltrain(proj, env))
    results["reuse"] = {"first_s": statistics.median(first), "reused_s": statistics.median(again),
                        "ratio": statistics.median(again) / statistics.median(first)}
    print(f"local 3-step chain: every step run {results['reuse']['first_s']:.2f}s, every step reused "
          f"{results['reuse']['reused_s']:.2f}s: ratio {results['reuse']['ratio']:.2f} (median of {args.repeats})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
