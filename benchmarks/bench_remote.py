"""A remote Slurm cluster over ssh (issue 65) against the same job submitted on the cluster's login itself, on
loopback (scripts/remote_ssh.sh: sshd on 127.0.0.1, another local user, the test Slurm cluster; ControlMaster on).

Three figures, alternating arms in each round:

  submit -> queued     `mltrain job=script ... compute=gpu-cluster --detach` here (sends mltrain's changes, the
                       run, starts its driver there, returns once Slurm has the job) | `mltrain ... compute=slurm
                       --detach` run on the cluster's login, timed there (no ssh in it)
  log line -> seen     a rank prints its clock; the command here, following the run, prints the line: the
                       difference (both sides share this machine's clock)
  unchanged snapshot   a project of 300 files (6 MB) sent again to a new run's folder: only the manifest travels
  4-member sweep       `mltrain -m ... compute=gpu-cluster +job.params.i=range(0,4)` here (its driver sent and run
                       there, each member mirrored here) | the same sweep with `compute=slurm` on the login: the
                       whole command, to its end

With --looks N: the cost of one look at N members running there (a detached N-member sweep whose members sleep),
one ssh call per member (as each look did before 2026-12-07) against one call for them all (RemoteBackend.refresh),
alternating.

Targets (issue 65): submit <= 1 s more than the login's own, a line seen <= 1 s after it is written, an unchanged
snapshot sent in <= 0.2 s.

Usage: source /tmp/mltrain-remote-ssh/env.sh; .venv/bin/python benchmarks/bench_remote.py [--rounds 5]
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
LOGIN = "mltrain-remote"
SCRIPT = """\
import time
print("T=%.6f" % time.time(), flush=True)
time.sleep(2)
"""


def ssh(command: str) -> str:
    return subprocess.run(["ssh", "-F", os.environ["MLTRAIN_SSH_CONFIG"], LOGIN, command], check=True,
                          capture_output=True, text=True).stdout


def project(root: Path, files: int = 0) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text(SCRIPT)
    for i in range(files):
        (root / "src" / "data" / f"d{i // 50}").mkdir(parents=True, exist_ok=True)
        (root / "src" / "data" / f"d{i // 50}" / f"f{i}.bin").write_bytes(os.urandom(20_000))
    (root / ".mltrain" / "compute").mkdir(parents=True)
    (root / ".mltrain" / "compute" / "gpu-cluster.yaml").write_text(
        f"defaults: [slurm_schema, _self_]\nlogin: {LOGIN}\npoll_s: 0.3\n")
    return root


JOB = ["job=script", "job.script=train.py", "job.source_directory=src"]


def submit_here(proj: Path, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([str(BIN / "mltrain"), *JOB, "compute=gpu-cluster", "--detach"], cwd=proj, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def submit_there(remote_proj: str, python: str, mltrain_dir: str, args: str = "--detach") -> float:
    """The same job from the cluster's login, timed there: its mltrain (the one sent) and its Python."""
    code = ("import subprocess,sys,time,os; t=time.perf_counter(); "
            f"subprocess.run([{python!r},'-m','mltrain',*sys.argv[1:]],check=True,capture_output=True,"
            f"env=dict(os.environ,PYTHONPATH={mltrain_dir!r})); print(time.perf_counter()-t)")
    out = ssh(f"cd {remote_proj} && {python} -c \"{code}\" {' '.join(JOB)} compute=slurm compute.poll_s=0.3 {args}")
    return float(out.strip().splitlines()[-1])


SWEEP = "+job.params.i=range(0,4)"


def sweep_here(proj: Path, env: dict) -> float:
    """A 4-member sweep from here, its driver on the cluster, followed to its end (every member mirrored here)."""
    start = time.perf_counter()
    subprocess.run([str(BIN / "mltrain"), "-m", *JOB, "compute=gpu-cluster", SWEEP], cwd=proj, env=env, check=True,
                   capture_output=True)
    return time.perf_counter() - start


def line_latency(proj: Path, env: dict) -> float:
    proc = subprocess.Popen([str(BIN / "mltrain"), *JOB, "compute=gpu-cluster"], cwd=proj, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    latency = float("nan")
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("T="):
            latency = time.time() - float(line[2:])
    proc.wait()
    return latency


def unchanged_send(proj: Path, env: dict) -> float:
    code = """
import sys, time
from pathlib import Path
from mltrain.backends.remote import shipping
cluster = shipping.ready(shipping.connect("mltrain-remote", "python3"))
entries = shipping.folder_entries(Path(sys.argv[1]), "snapshot")
shipping.send(cluster, entries, "remote/bench/warm")          # every file there once
t = time.perf_counter()
shipping.send(cluster, entries, f"remote/bench/again-{time.time_ns()}")
print(time.perf_counter() - t)
"""
    # cwd: not this checkout, whose mltrain/ `python -c` would import before the installed one
    out = subprocess.run([sys.executable, "-c", code, str(proj / "src")], env=env, check=True, capture_output=True,
                         text=True, cwd=proj).stdout
    return float(out.strip().splitlines()[-1])


LOOKS = """
import json, statistics, sys, time
from pathlib import Path
from mltrain.backends.remote.backend import RemoteBackend
from mltrain.runs.record import RunRecord
records = [RunRecord.load(p.parent) for p in Path(sys.argv[1]).glob("*/run.json")]
backend, one, batched = RemoteBackend(), [], []
for i in range(int(sys.argv[2])):
    for arm in ((0, 1) if i % 2 == 0 else (1, 0)):
        t = time.perf_counter()
        if arm == 0:
            for record in records:
                backend._look(record)
        else:
            backend.refresh(records)
        (one if arm == 0 else batched).append(time.perf_counter() - t)
print(json.dumps({"members": len(records), "per_member_s": one, "batched_s": batched}))
"""


def look_cost(proj: Path, env: dict, members: int, rounds: int) -> None:
    (proj / "src" / "hold.py").write_text("import time\nprint('holding', flush=True)\ntime.sleep(300)\n")
    subprocess.run([str(BIN / "mltrain"), "-m", "job=script", "job.script=hold.py", "job.source_directory=src",
                    "compute=gpu-cluster", f"+job.params.i=range(0,{members})", "--detach"], cwd=proj, env=env,
                   check=True, capture_output=True)
    runs = Path(env["MLTRAIN_HOME"], "runs")
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # every member mirrored here and Running there
        subprocess.run([str(BIN / "mltrain"), "runs", "list"], cwd=proj, env=env, capture_output=True)
        docs = [json.loads(p.read_text()) for p in runs.glob("*/run.json")]
        if len(docs) == members and all(d["status"] == "Running" for d in docs):
            break
        time.sleep(1)
    else:
        raise SystemExit(f"the {members} members were not all Running within 180 s")
    out = subprocess.run([sys.executable, "-c", LOOKS, str(runs), str(rounds)], env=env, check=True,
                         capture_output=True, text=True, cwd=proj).stdout
    sweep = next(Path(env["MLTRAIN_HOME"], "runs").glob("*/run.json"))
    sweep_dir = json.loads(sweep.read_text())["sweep"]["dir"]
    subprocess.run([str(BIN / "mltrain"), "runs", "cancel", Path(sweep_dir).name], cwd=proj, env=env,
                   capture_output=True)
    found = json.loads(out.strip().splitlines()[-1])
    med = statistics.median
    print(f"one look at {found['members']} running members: one ssh call each {med(found['per_member_s']):.3f} s, "
          f"one call for all {med(found['batched_s']):.3f} s "
          f"(ratio {med(found['batched_s']) / med(found['per_member_s']):.2f}); rounds {rounds}")
    print(json.dumps(found))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--looks", type=int, metavar="N", help="only the cost of one look at N running members")
    args = ap.parse_args()
    if args.looks:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "MLTRAIN_HOME": str(Path(tmp, "home")), "MLTRAIN_TRACKING": "off"}
            look_cost(project(Path(tmp, "proj")), env, args.looks, args.rounds)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "MLTRAIN_HOME": str(Path(tmp, "home")), "MLTRAIN_TRACKING": "off"}
        proj = project(Path(tmp, "proj"), files=300)
        submit_here(proj, env)  # warm: mltrain and its venv there, the project's files
        runs = Path(tmp, "home", "runs")
        part = json.loads(next(runs.glob("*/run.json")).read_text())["remote"]
        home_there = ssh("echo ~").strip()
        remote_proj = f"{home_there}/bench-proj"
        ssh(f"rm -rf {remote_proj} && mkdir -p {remote_proj} && cp -r {part['run_dir']}/snapshot {remote_proj}/src")
        python = f"{home_there}/.mltrain/remote/venv/bin/python"
        mltrain_dir = ssh(f"ls -td {home_there}/.mltrain/remote/mltrain/*/ | head -1").strip().rstrip("/")  # the one just sent
        submit_there(remote_proj, python, mltrain_dir)  # warm
        here, there, lines, sends, sweeps_here, sweeps_there = [], [], [], [], [], []
        for i in range(args.rounds):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for arm in order:
                if arm == 0:
                    here.append(submit_here(proj, env))
                    sweeps_here.append(sweep_here(proj, env))
                else:
                    there.append(submit_there(remote_proj, python, mltrain_dir))
                    sweeps_there.append(submit_there(remote_proj, python, mltrain_dir, f"-m '{SWEEP}'"))
            lines.append(line_latency(proj, env))
            sends.append(unchanged_send(proj, env))
        subprocess.run(["scancel", "-u", LOGIN], capture_output=True)
        med = statistics.median
        print(f"submit -> queued: from here {med(here):.3f} s, on the login {med(there):.3f} s, "
              f"difference {med(here) - med(there):+.3f} s (target <= +1 s); rounds {args.rounds}")
        print(f"log line -> seen here: median {med(lines):.3f} s, max {max(lines):.3f} s (target <= 1 s)")
        print(f"unchanged snapshot (300 files, 6 MB) sent again: median {med(sends):.3f} s (target <= 0.2 s)")
        print(f"4-member sweep, whole command: from here {med(sweeps_here):.3f} s, on the login "
              f"{med(sweeps_there):.3f} s, difference {med(sweeps_here) - med(sweeps_there):+.3f} s")
        print(json.dumps({"here_s": here, "there_s": there, "line_s": lines, "unchanged_send_s": sends,
                          "sweep_here_s": sweeps_here, "sweep_there_s": sweeps_there}))


if __name__ == "__main__":
    main()
