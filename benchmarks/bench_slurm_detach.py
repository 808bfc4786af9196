"""Queueing a sweep of many members with `--detach` on the test cluster (issue 36): how long until the command
returns with every member queued, and the driver's peak memory. Targets for 10,000 members: 10 s, 300 MB.

Arms, in turn, the order rotated every round, the queue drained between measurements:

  mltrain_packed    mltrain -m job=command job.command=true compute=slurm compute.pack=8
                    '+job.params.i=range(0,N)' --detach (deferred members: mltrain.launch.deferred)
  mltrain_unpacked  the same without compute.pack: one array task per member
  sbatch_arrays     what a user would otherwise type: `sbatch --array=A-B%8 --wrap true` per chunk of the
                    cluster's MaxArraySize; it queues tasks, not runs (no record, folder or config of any member)
  previous          (with --previous REV) mltrain_packed at that revision, installed beside this tree

Peak memory is /usr/bin/time's maximum resident set of the command's process. Run it on a cluster of its own:
every job of the user is cancelled between measurements.

Usage: .venv/bin/python benchmarks/bench_slurm_detach.py [--members 10000] [--rounds 3] [--previous REV]
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
from typing import Dict, List

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from bench_release import drain, install_previous  # noqa: E402 - the same queue drain and previous install

BIN = Path(sys.executable).parent


def max_array_size(env: Dict[str, str]) -> int:
    out = subprocess.run(["scontrol", "show", "config"], env=env, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.split("=")[0].strip() == "MaxArraySize":
            return int(line.split("=")[1])
    return 1001


def measured(cmd: List[str], cwd: Path, env: Dict[str, str]) -> Dict[str, object]:
    """Wall seconds, peak resident MB, exit status and the last line of stderr of one command."""
    report = Path(tempfile.mkstemp(prefix="bench-time-")[1])
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-o", str(report), "-f", "%M", *cmd], cwd=cwd, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    peak_kb = int(report.read_text().split()[-1])
    report.unlink()
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Command exited" not in line]
    return {"wall_s": round(wall, 3), "peak_mb": round(peak_kb / 1024, 1), "rc": done.returncode,
            "said": lines[-1][:300] if lines else ""}


def arms(members: int, work: Path, env: Dict[str, str], previous: Path | None) -> Dict[str, List[List[str]]]:
    sweep = ["-m", "job=command", "job.command=true", "compute=slurm", f"+job.params.i=range(0,{members})", "--detach"]
    out = {"mltrain_packed": [[str(BIN / "mltrain"), *sweep, "compute.pack=8"]],
           "mltrain_unpacked": [[str(BIN / "mltrain"), *sweep]]}
    size = max_array_size(env) - 1  # indices 0 .. MaxArraySize-1
    out["sbatch_arrays"] = [["sbatch", "--parsable", f"--array=0-{min(size, members - start) - 1}%8",
                             f"--output={work}/sbatch-%A_%a.out", "--wrap", "true"]
                            for start in range(0, members, size)]
    if previous is not None:
        out["previous"] = [[sys.executable, "-c", "import sys; from mltrain.cli.main import main; sys.exit(main())",
                            *sweep, "compute.pack=8"]]
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--members", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--previous", help="a git revision: its mltrain_packed arm beside this tree's")
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    if not shutil.which("sbatch") or not os.environ.get("SLURM_CONF"):
        raise SystemExit("needs a Slurm cluster: bash scripts/slurm_cluster.sh start DIR; source DIR/env.sh")
    previous = install_previous(args.previous) if args.previous else None
    work = Path(tempfile.mkdtemp(prefix="bench-detach-"))
    base = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    envs = {"previous": {**base, "PYTHONPATH": str(previous)}} if previous else {}
    table = arms(args.members, work, base, previous)
    names = list(table)
    results: Dict[str, List[Dict[str, object]]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            drain(base)
            env = envs.get(name, base)
            parts = [measured(cmd, work, env) for cmd in table[name]]
            one = {"wall_s": round(sum(float(x["wall_s"]) for x in parts), 3),  # type: ignore[arg-type]
                   "peak_mb": max(float(x["peak_mb"]) for x in parts),  # type: ignore[arg-type]
                   "rc": max(int(x["rc"]) for x in parts), "said": parts[-1]["said"]}  # type: ignore[call-overload]
            results[name].append(one)
            print(f"round {r + 1} {name:<17} {one['wall_s']:8.2f} s  peak {one['peak_mb']:7.1f} MB  rc {one['rc']}"
                  + (f"  {one['said']}" if one["rc"] else ""), flush=True)
    drain(base)
    summary = {name: {"median_wall_s": statistics.median(float(x["wall_s"]) for x in rows),  # type: ignore[arg-type]
                      "max_peak_mb": max(float(x["peak_mb"]) for x in rows),  # type: ignore[arg-type]
                      "rc": sorted({int(x["rc"]) for x in rows})}  # type: ignore[call-overload]
               for name, rows in results.items()}
    print(f"\n{args.members} members, medians of {args.rounds} rounds, {os.cpu_count()} CPUs, "
          f"MaxArraySize {max_array_size(base)}")
    for name, s in summary.items():
        print(f"  {name:<17} {s['median_wall_s']:8.2f} s  peak {s['max_peak_mb']:7.1f} MB  exit {s['rc']}")
    if args.json:
        args.json.write_text(json.dumps({"members": args.members, "rounds": results, "summary": summary}, indent=2))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
