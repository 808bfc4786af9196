"""Teardown aborts of a finished rank: how often a correct 2-rank gloo DDP script (benchmarks/assets/
ddp_save_and_exit.py: trains, saves, destroys its process group) dies after its work, by launcher.

Each round runs the same script once under each launcher, alternating: `mltrain job=script` (the
script runs through mltrain/ranks/script_main.py), `mltrain job=command 'python ...'` (the rank's
sitecustomize leaves at exit() before C++ static destructors) and `torchrun --nproc_per_node=2`; the
`native` launcher is `mltrain job=command` with MLTRAIN_NATIVE_TEARDOWN=1, i.e. the interpreter's own
teardown, as mltrain ran every rank before.
A run counts as aborted when it did not end 0 or its output says "terminate called" / "Aborted".

Usage: .venv/bin/python benchmarks/bench_teardown.py [--runs 100] [--launchers script,command,torchrun]
       (add `compute=slurm` runs with --slurm; needs a cluster: source its env.sh)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
SCRIPT = HERE / "assets" / "ddp_save_and_exit.py"


def commands(work: Path, slurm: bool) -> dict:
    ddp = ["distribution=pytorch", "distribution.process_count_per_node=2", f"job.source_directory={HERE / 'assets'}",
           f"run.root={work / 'runs'}"] + (["compute=slurm"] if slurm else [])
    return {
        "script": [str(BIN / "mltrain"), "job=script", f"job.script={SCRIPT.name}", *ddp],
        "command": [str(BIN / "mltrain"), "job=command", f"job.command=python {SCRIPT.name}", *ddp],
        "torchrun": [str(BIN / "torchrun"), "--standalone", "--nproc_per_node=2", str(SCRIPT)],
        "native": [str(BIN / "mltrain"), "job=command", f"job.command=python {SCRIPT.name}", *ddp],
    }


def aborted(cmd: list, cwd: Path, env: dict) -> bool:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    text = proc.stdout + proc.stderr
    return proc.returncode != 0 or "terminate called" in text or "Aborted" in text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--launchers", default="script,command,native,torchrun")
    parser.add_argument("--slurm", action="store_true", help="mltrain's runs with compute=slurm")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-teardown-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    table = commands(work, args.slurm)
    chosen = args.launchers.split(",")
    counts = {name: 0 for name in chosen}
    start = time.monotonic()
    for i in range(args.runs):
        for name in chosen:
            run_env = {**env, "MLTRAIN_NATIVE_TEARDOWN": "1"} if name == "native" else env
            counts[name] += aborted(table[name], work, run_env)
        if (i + 1) % 10 == 0:
            print(f"after {i + 1} rounds ({time.monotonic() - start:.0f} s): "
                  + ", ".join(f"{n} {c}" for n, c in counts.items()), flush=True)
    where = "Slurm" if args.slurm else "local"
    for name in chosen:
        print(f"{name} ({where if name != 'torchrun' else 'local'}): {counts[name]} aborted of {args.runs}")


if __name__ == "__main__":
    main()
