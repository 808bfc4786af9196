"""The local GPU pool: every run, rank and trial on its own devices (issue 48).

This machine has no GPU: the pool is given four declared devices (`CUDA_VISIBLE_DEVICES=0,1,2,3`, the list a
user or a scheduler sets), and the tests read what each rank *saw* (its own CUDA_VISIBLE_DEVICES, printed by
the rank's program), not what mltrain meant to give it."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from support import mltrain_exe, only_run, run_mltrain, runs, until

FOUR = {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}

SHOW = """\
echo "seen start=$(date +%s.%N) devices=$CUDA_VISIBLE_DEVICES rank=$RANK"
sleep "${HOLD_S:-1}"
echo "seen end=$(date +%s.%N)"
"""


def _project(project: Path) -> Path:
    (project / "show.sh").write_text(SHOW)
    return project


def _seen(home: Path) -> list:
    """(start, end, devices) of every rank of every run, from the ranks' own logs."""
    out = []
    for run in runs(home):
        for log in sorted((Path(run["dir"]) / "logs").glob("rank_*.log")):
            text = log.read_text()
            start = re.search(r"seen start=([\d.]+) devices=(\S*) rank=(\d+)", text)
            end = re.search(r"seen end=([\d.]+)", text)
            assert start and end, f"{log}: {text}"
            out.append((float(start.group(1)), float(end.group(1)), start.group(2), run["id"]))
    return out


def _never_shared(seen: list) -> None:
    """No two ranks of different runs that ran at the same time saw a device in common."""
    for i, (s1, e1, d1, r1) in enumerate(seen):
        for s2, e2, d2, r2 in seen[i + 1:]:
            if r1 != r2 and s1 < e2 and s2 < e1:
                assert not set(d1.split(",")) & set(d2.split(",")), (r1, d1, r2, d2)


COMMAND = ["job=command", "job.command=bash show.sh", "job.source_directory=."]


def test_a_sweep_of_8_one_gpu_members_4_at_a_time_never_shares_a_device(home, project):
    _project(project)
    t0 = time.monotonic()
    r = run_mltrain("-m", *COMMAND, "compute.gpus=1", "compute.max_concurrent_jobs=4", "+job.params.i=range(0,8)",
                    cwd=project, env=FOUR)
    wall = time.monotonic() - t0
    assert r.rc == 0, r.out + r.err
    seen = _seen(home)
    assert len(seen) == 8 and all(len(d.split(",")) == 1 for _, _, d, _ in seen)
    assert {d for _, _, d, _ in seen} == {"0", "1", "2", "3"}  # all four used, not all on device 0
    _never_shared(seen)
    # 4 at a time: two rounds of one second each, not eight
    assert wall < 8, wall
    for run in runs(home):
        assert len(run["ranks"]["0"]["devices"]) == 1 and run["ranks"]["0"]["host"]


def test_two_commands_started_at_once_share_the_pool(home, project):
    _project(project)
    argv = mltrain_exe() + ["-m", *COMMAND, "compute.gpus=1", "compute.max_concurrent_jobs=3",
                            "+job.params.i=range(0,3)"]
    env = {**os.environ, **FOUR}
    procs = [subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    seen = _seen(home)
    assert len(seen) == 6
    _never_shared(seen)  # six one-GPU runs wanted four devices: two waited, saying for what
    assert re.search(r"Queued: waiting for 1 GPU\(s\): 4 of 4 held \(0 by run \S+", "".join(outs)), outs


def test_one_gpu_per_rank_gives_each_rank_its_own_device(home, project):
    _project(project)
    r = run_mltrain(*COMMAND, "distribution=pytorch", "distribution.process_count_per_node=2",
                    "distribution.backend=gloo", "compute.gpus_per_task=1", "run.console=all", cwd=project, env=FOUR)
    assert r.rc == 0, r.out + r.err
    seen = {m.group(2): m.group(1) for m in re.finditer(r"devices=(\S*) rank=(\d+)", r.out)}
    assert len(seen["0"].split(",")) == len(seen["1"].split(",")) == 1 and seen["0"] != seen["1"], seen
    run = only_run(home)
    assert {run["ranks"][k]["devices"] for k in ("0", "1")} == {seen["0"], seen["1"]}
    shown = run_mltrain("runs", "show", run["id"], cwd=project)
    assert f"rank 1:    exit code 0 on {run['ranks']['1']['host']}, GPUs {seen['1']}" in shown.out, shown.out


def test_ranks_of_a_run_see_its_devices_and_pick_by_local_rank_by_default(home, project):
    """compute.gpus unset: one device per rank, both seen by every rank (torchrun's convention)."""
    _project(project)
    r = run_mltrain(*COMMAND, "distribution=pytorch", "distribution.process_count_per_node=2",
                    "distribution.backend=gloo", "run.console=all", cwd=project, env=FOUR)
    assert r.rc == 0, r.out + r.err
    seen = {m.group(2): m.group(1) for m in re.finditer(r"devices=(\S*) rank=(\d+)", r.out)}
    assert seen["0"] == seen["1"] and len(seen["0"].split(",")) == 2, seen


def test_kill_9_of_a_driver_returns_its_devices_to_the_pool(home, project):
    _project(project)
    env = {**os.environ, **FOUR, "HOLD_S": "300"}
    holder = subprocess.Popen(mltrain_exe() + [*COMMAND, "compute.gpus=4"], cwd=project, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        until(lambda: any(r["status"] == "Running" for r in runs(home)), 60, "the first run to start")
        first = runs(home)[0]
        until(lambda: (Path(first["dir"]) / "logs" / "rank_0.log").is_file()
              and "seen start" in (Path(first["dir"]) / "logs" / "rank_0.log").read_text(), 30, "its rank to start")
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
        t0 = time.monotonic()
        r = run_mltrain(*COMMAND, "compute.gpus=4", cwd=project, env={**FOUR, "HOLD_S": "0"}, timeout=60)
        took = time.monotonic() - t0
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
    assert r.rc == 0, r.out + r.err
    print(f"kill -9 of the driver holding 4 of 4 GPUs: the next run needing all 4 ended in {took:.2f} s")
    assert took < 10, took  # at once: no lock left behind, no stale entry to time out
    second = [x for x in runs(home) if x["id"] != first["id"]][0]
    assert second["ranks"]["0"]["devices"] == "0,1,2,3"
    pid = json.loads((Path(first["dir"]) / "run.json").read_text())["ranks"]["0"]["pid"]
    assert not Path(f"/proc/{pid}").exists()  # the first run's rank was stopped, not left on the devices


def test_a_gpu_request_no_device_can_satisfy_is_refused_in_one_line(home, project):
    _project(project)
    r = run_mltrain(*COMMAND, "compute.gpus=5", cwd=project, env=FOUR)
    assert r.rc != 0 and r.err.strip().count("\n") == 0, r.err
    assert "compute.gpus: 5 asked; this machine has 4 GPU(s) (0,1,2,3)" in r.err
    r = run_mltrain(*COMMAND, "distribution=pytorch", "distribution.process_count_per_node=3",
                    "distribution.backend=gloo", "compute.gpus_per_task=2", cwd=project, env=FOUR)
    assert r.rc != 0 and "compute.gpus_per_task: 2 per rank x 3 rank(s) is 6 GPUs; this machine has 4" in r.err, r.err
    r = run_mltrain(*COMMAND, "compute.gpus=1", cwd=project)  # the tests' machine: no device at all
    assert r.rc != 0 and "no NVIDIA driver" in r.err, r.err
    assert runs(home) == []  # nothing started, nothing half-made


def test_the_dry_run_shows_the_devices_a_run_would_get_now(home, project):
    _project(project)
    r = run_mltrain(*COMMAND, "compute.gpus=2", "--dry-run", cwd=project, env={"CUDA_VISIBLE_DEVICES": "3,5,7"})
    assert r.rc == 0, r.err
    assert "CUDA_VISIBLE_DEVICES=3,5\n" in r.out
    assert "GPUs: 2 of this machine's 3 (3,5,7), seen by every rank, taken from the pool when the run starts" in r.out
