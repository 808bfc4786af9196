"""The README's benchmark rows, this tree against the previous release, side by side in one run.

Each row runs three arms in turn, the order rotated every round: the previous release, this one, and the
row's peer (what a user would otherwise run). Medians of N rounds; the ratios are this release over the
previous one (a regression is > 1) and this release over the peer.

  2-rank gloo job        mltrain job=script distribution=pytorch ... | torchrun --nproc_per_node=2
  --cfg job              mltrain --cfg job | a bare Hydra app's --cfg job
  job create             mltrain job create --file hello-world.yml | mltrain job=command (this release)
  job create pipeline    mltrain job create --file two-step pipeline.yml | mltrain pipeline=two (this release),
                         every step run (force_rerun)
  100 members queued     mltrain -m job=command ... compute=slurm '+job.params.i=range(0,100)' --detach
                         | sbatch --array=0-99 of the same command            (needs SLURM_CONF)
  10-member Hydra sweep  a plain Hydra app, hydra/launcher=mltrain_slurm | submitit_slurm (needs SLURM_CONF)

The previous release is installed into a folder of its own (`pip install --no-deps --target`) from a git
revision and put first on PYTHONPATH for its arm; the same interpreter and packages run both. Run it on a
cluster of its own: the Slurm rows cancel every job of the user between measurements.

Usage: .venv/bin/python benchmarks/bench_release.py --previous REV [--rounds 5] [--rows a,b,...]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import bench_slurm_sweep  # noqa: E402 - its queue drain
from bench_job_create import HELLO  # noqa: E402 - the same hello-world job file

ROOT = HERE.parent
BIN = Path(sys.executable).parent


def install_previous(rev: str) -> Path:
    """The release at `rev`, installed once into a folder of its own (kept for later runs)."""
    sha = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    target = Path(tempfile.gettempdir()) / f"mltrain-release-{sha[:12]}"
    if (target / "mltrain").is_dir():
        return target
    source = Path(tempfile.mkdtemp(prefix="mltrain-release-src-"))
    subprocess.run(f"git archive {sha} | tar -x -C {source}", shell=True, cwd=ROOT, check=True)
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
                       check=True, cwd=source)
    finally:
        shutil.rmtree(source, ignore_errors=True)
    return target


def timed(cmd: List[str], cwd: Path, env: Dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    return took


def drain(env: Dict[str, str]) -> None:
    """Cancel every job of this user and wait for an empty queue (this cluster is the benchmark's own)."""
    subprocess.run(["scancel", "-u", os.environ.get("USER", "root")], env=env, check=False)
    bench_slurm_sweep.drain(env, limit_s=120)


#: A two-step v2 pipeline of commands, every step run each time, and the same pipeline in mltrain's own config.
TWO_STEPS_V2 = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
settings:
  force_rerun: true
jobs:
  first:
    type: command
    command: echo first
  second:
    type: command
    command: echo second
"""
TWO_STEPS = """\
steps:
  first:
    overrides: [job=command, 'job.command=echo first']
  second:
    overrides: [job=command, 'job.command=echo second']
"""


def rows(work: Path, slurm: bool) -> Dict[str, Dict[str, Optional[Callable[[Dict[str, str]], float]]]]:
    """Per row, per arm: a measurement given the arm's environment. `previous` and `current` run the same
    command line; the peer's comes last."""
    mltrain = str(BIN / "mltrain")
    script = str(HERE / "assets" / "trivial_gloo.py")
    (work / "hello-world.yml").write_text(HELLO)
    ddp = [mltrain, "job=script", f"job.script={script}", "distribution=pytorch",
           "distribution.process_count_per_node=2", "distribution.backend=gloo"]
    out: Dict[str, Dict[str, Optional[Callable[[Dict[str, str]], float]]]] = {
        "2-rank gloo job": {"mltrain": lambda env: timed(ddp, work, env),
                            "torchrun": lambda env: timed([str(BIN / "torchrun"), "--nproc_per_node=2", script], work, env)},
        "--cfg job": {"mltrain": lambda env: timed([mltrain, "--cfg", "job"], work, env),
                      "bare Hydra app": lambda env: timed([sys.executable, str(HERE / "assets" / "bare_hydra_app.py"),
                                                           "--cfg", "job"], work, env)},
        "job create": {"mltrain": lambda env: timed([mltrain, "job", "create", "--file", "hello-world.yml"], work, env),
                       "mltrain job=command": lambda env: timed([mltrain, "job=command", "job.command=echo hello world"],
                                                                work, env)},
        "job create pipeline": {
            "mltrain": lambda env: timed([mltrain, "job", "create", "--file", "pipeline.yml"], work, env),
            "mltrain pipeline=two": lambda env: timed([mltrain, "pipeline=two", "--force-rerun"], work, env)},
    }
    (work / "pipeline.yml").write_text(TWO_STEPS_V2)
    (work / ".mltrain" / "pipeline").mkdir(parents=True, exist_ok=True)
    (work / ".mltrain" / "pipeline" / "two.yaml").write_text(TWO_STEPS)
    if slurm:
        array = work / "array.sh"
        array.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=1\n#SBATCH --cpus-per-task=1\n"
                         f"#SBATCH --array=0-99%256\n#SBATCH --output={work}/sb_%a.out\nsrun --kill-on-bad-exit=1 true\n")

        def queued(cmd: List[str]) -> Callable[[Dict[str, str]], float]:
            def measure(env: Dict[str, str]) -> float:
                took = timed(cmd, work, env)
                drain(env)
                return took
            return measure

        out["100 members queued"] = {
            "mltrain": queued([mltrain, "-m", "job=command", "job.command=true", "compute=slurm",
                               "+job.params.i=range(0,100)", "--detach"]),
            "sbatch --array": queued(["sbatch", "--parsable", str(array)])}
        app = str(HERE / "assets" / "sweep_app.py")
        counter = iter(range(10**6))

        def sweep(launcher: str) -> Callable[[Dict[str, str]], float]:
            return lambda env: timed([sys.executable, app, "-m", "x=range(0,10)", f"hydra/launcher={launcher}",
                                      f"hydra.sweep.dir={work}/sweep_{next(counter)}", "hydra.launcher.timeout_min=10"],
                                     work, env)

        # the peer comes from `pip install '.[bench]'`; without it the row still compares the two mltrains
        peer = sweep("submitit_slurm") if importlib.util.find_spec("hydra_plugins.hydra_submitit_launcher") else None
        out["10-member Hydra sweep on Slurm"] = {"mltrain": sweep("mltrain_slurm"), "submitit_slurm": peer}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--previous", required=True, help="the git revision of the previous release")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", default="", help="comma-separated row names (default: every row)")
    args = ap.parse_args()
    previous = install_previous(args.previous)
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-release-"))
    base = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off", "CUDA_VISIBLE_DEVICES": "",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    base.pop("PYTHONPATH", None)
    envs = {"previous": {**base, "PYTHONPATH": str(previous)}, "current": base}
    table = rows(work, bool(os.environ.get("SLURM_CONF")))
    wanted = [r for r in args.rows.split(",") if r] or list(table)
    results = {}
    for row in wanted:
        arms = table[row]
        (ours_name, ours), (peer_name, peer) = list(arms.items())
        runs: Dict[str, Callable[[], float]] = {"previous": partial(ours, envs["previous"]),
                                                "current": partial(ours, envs["current"])}
        if peer is not None:
            runs[peer_name] = partial(peer, envs["current"])
        for run in runs.values():  # warm-up: the page cache, Slurm's accounting
            run()
        times: Dict[str, List[float]] = {name: [] for name in runs}
        names = list(runs)
        for i in range(args.rounds):
            for name in names[i % len(names):] + names[:i % len(names)]:
                times[name].append(runs[name]())
        med = {name: statistics.median(t) for name, t in times.items()}
        results[row] = {"medians_s": med, "current/previous": med["current"] / med["previous"]}
        against = f"{peer_name} not installed"
        if peer_name in med:
            results[row][f"current/{peer_name}"] = med["current"] / med[peer_name]
            against = f"{peer_name} {med[peer_name]:.3f}s  (current/{peer_name} {med['current'] / med[peer_name]:.2f})"
        print(f"{row:<32} previous {med['previous']:.3f}s  current {med['current']:.3f}s  "
              f"({med['current'] / med['previous']:.2f})  {against}", flush=True)
    print(f"{ours_name} at {args.previous} and at this tree, medians of {args.rounds} rounds, {os.cpu_count()} CPUs")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
