"""History at scale: `mltrain runs list` (newest 50) and `runs show RUN` with 10,000 runs on disk, this
checkout (the runs index) against the code before the runs index (every run.json parsed on each look),
each a cold process, alternating, medians of --pairs, and the ratio printed (targets: <= 0.3 s each).
With --sweep N, also the peak resident memory of the controller of an N-member local sweep of trivial
members (target: < 200 MB at 1,000).

The 10,000 runs are written synthetically: each folder as mltrain makes it (run.json with the same
fields and size as a real local run's, including the environment's package list; logs/, outputs/,
checkpoints/, metrics.jsonl). The peer is the commit before mltrain/runs/index.py was added, installed
into a temporary folder (git archive + pip install --target); --peer-ref names another.

Usage: .venv/bin/python benchmarks/bench_history.py [--runs 10000] [--pairs 9] [--sweep 1000]
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

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
PACKAGES = [f"package-{i:03d}=={i % 9}.{i % 13}.{i % 7}" for i in range(150)]  # a real venv's listing is ~150 lines


def record(run_id: str, folder: Path, created: float, i: int) -> dict:
    phases = {"NotStarted": created, "Queued": created + 0.4, "Preparing": created + 0.41,
              "Running": created + 0.5, "Finalizing": created + 3.0 + i % 5, "Completed": created + 3.01 + i % 5}
    return {
        "backend": "local", "command": ["/bin/sh", "-c", f"python train.py --lr 0.{i % 97 + 1}"], "compute": "local",
        "created": created, "cwd": str(folder / "snapshot"), "distribution": "none", "driver_pid": 100000 + i,
        "environment": {"cache_key": f"{i % 3:016x}", "interpreter": sys.executable, "materialized": "user-managed",
                        "packages": PACKAGES, "spec": {"name": "current", "pip": [], "user_managed": True,
                                                       "environment_variables": {}, "setup": []}},
        "error": None, "experiment": f"exp{i % 7}", "host": "bench", "id": run_id, "kill_grace_s": 5.0, "layout": 3,
        "outputs": [{"path": "model.pt", "bytes": 1234}], "overrides": ["job=command", f"+lr=0.{i % 97 + 1}"],
        "phases": phases, "process_group": None,
        "ranks": {"0": {"exit_code": 0, "host": "localhost", "pid": 200000 + i, "stopped_by_mltrain": False}},
        "snapshot": {"bytes": 12345, "files": 12, "hash": f"{i:064x}", "ignore_files": [], "seconds": 0.01,
                     "source": "/home/user/project"},
        "status": "Completed", "sweep": {"dir": None, "index": None},
        "world": {"master_addr": "127.0.0.1", "master_port": 40000 + i % 20000, "node_count": 1,
                  "process_count_per_node": 1, "world_size": 1},
    }


def synthesize(root: Path, n: int) -> list:
    root.mkdir(parents=True)
    start = time.time() - n * 60
    ids = []
    for i in range(n):
        run_id = f"exp{i % 7}_{time.strftime('%Y%m%d_%H%M%S', time.localtime(start + i * 60))}_{i:06x}"
        folder = root / run_id
        for sub in ("logs", "outputs", "checkpoints"):
            (folder / sub).mkdir(parents=True)
        (folder / "metrics.jsonl").write_text("".join(
            json.dumps({"name": "loss", "value": 1.0 / (s + 1), "step": s, "rank": 0}) + "\n" for s in range(5)))
        (folder / "run.json").write_text(json.dumps(record(run_id, folder, start + i * 60, i), indent=2, sort_keys=True))
        ids.append(run_id)
    return ids


def peer_site(tmp: Path, ref: str | None) -> Path:
    """The code before the runs index, installed into a folder of its own."""
    if ref is None:
        added = subprocess.run(["git", "-C", str(REPO), "log", "--diff-filter=A", "--format=%H", "--",
                                "mltrain/runs/index.py"], capture_output=True, text=True, check=True).stdout.split()
        ref = f"{added[-1]}^"
    src, site = tmp / "peer-src", tmp / "peer-site"
    src.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(src)], check=True)
    return site


def timed(cmd: list, env: dict, cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def compare(name: str, ours: list, peer: list, env: dict, peer_env: dict, cwd: Path, pairs: int) -> None:
    timed(ours, env, cwd), timed(peer, peer_env, cwd)  # page cache and bytecode warm for both
    measured = [(timed(ours, env, cwd), timed(peer, peer_env, cwd)) for _ in range(pairs)]
    a, b = statistics.median(m[0] for m in measured), statistics.median(m[1] for m in measured)
    ratios = sorted(x / y for x, y in measured)
    print(f"{name}: index {a:.3f} s   before the index {b:.3f} s   ratio of medians {a / b:.3f} "
          f"(pairs {ratios[0]:.3f}-{ratios[-1]:.3f}; target <= 0.3 s)", flush=True)


def sweep_peak_rss(name: str, members: int, cwd: Path, env: dict) -> None:
    """Peak RSS of the `mltrain -m` process itself (the controller), from a wrapper that only waits on it."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, time.perf_counter() - t)")
    cmd = [sys.executable, "-c", probe, sys.executable, "-m", "mltrain", "-m", "job=command", "job.command=true",
           f"+job.params.member=range(0,{members})"]
    rc, kb, took = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.split()
    print(f"{members}-member local sweep, {name}: controller peak RSS {int(kb) / 1024:.0f} MB (the largest of its process tree "
          f"waited for; members are `true`), exit {rc}, {float(took):.0f} s (target < 200 MB)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--sweep", type=int, default=0, help="members of the local sweep whose controller is measured")
    ap.add_argument("--peer-ref", help="git ref of the code to compare against (default: before the runs index)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp_name:
        tmp = Path(tmp_name)
        cwd = tmp / "cwd"
        cwd.mkdir()
        home = tmp / "home"
        started = time.perf_counter()
        ids = synthesize(home / "runs", a.runs)
        print(f"{a.runs} run folders written in {time.perf_counter() - started:.1f} s", flush=True)
        env = {**os.environ, "MLTRAIN_HOME": str(home), "MLTRAIN_TRACKING": "off"}
        peer_env = {**env, "PYTHONPATH": str(peer_site(tmp, a.peer_ref))}
        ours = peer = [sys.executable, "-m", "mltrain"]  # launched alike; PYTHONPATH picks the code
        started = time.perf_counter()
        subprocess.run(ours + ["runs", "list"], env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        print(f"first `runs list` (the index built from the folders): {time.perf_counter() - started:.2f} s", flush=True)
        for name, args in (("runs list", ["runs", "list"]), ("runs show RUN", ["runs", "show", ids[len(ids) // 2]]),
                           ("runs show (the newest)", ["runs", "show"])):
            compare(name, ours + args, peer + args, env, peer_env, cwd, a.pairs)
        if a.sweep:  # one each: a 1,000-member sweep takes minutes here
            sweep_peak_rss("index", a.sweep, cwd, {**env, "MLTRAIN_HOME": str(tmp / "sweep-home")})
            sweep_peak_rss("before the index", a.sweep, cwd, {**peer_env, "MLTRAIN_HOME": str(tmp / "sweep-home-peer")})


if __name__ == "__main__":
    main()
