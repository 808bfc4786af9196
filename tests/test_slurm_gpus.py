"""GPUs on the real test cluster (issue 48): scripts/slurm_cluster.sh declares 4 GPUs to Slurm (stand-in devices,
`Gres=gpu:4`), so Slurm itself allocates them and sets each task's CUDA_VISIBLE_DEVICES. These tests read what
each rank SAW (its program prints $CUDA_VISIBLE_DEVICES), never what mltrain meant to give it."""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Dict, List

import pytest
from slurm_support import require_cluster
from support import leftovers, run_mltrain, runs

pytestmark = pytest.mark.slurm
SLURM = ["compute=slurm", "compute.poll_s=0.3"]
#: What each rank saw, and when it ran (its own clock), printed by the rank program itself.
SHOW = ('echo "saw rank=$RANK host=$(hostname) devices=${CUDA_VISIBLE_DEVICES-unset} start=$(date +%s.%N)"\n'
        'sleep "${AML_PARAMETER_sleep:-0}"\n'
        'echo "ended=$(date +%s.%N)"\n')
SEEN = re.compile(r"saw rank=(\d+) host=(\S+) devices=(\S+) start=([\d.]+)\s+ended=([\d.]+)")


@pytest.fixture(autouse=True)
def _cluster(request):
    if request.node.get_closest_marker("no_cluster") is None:
        require_cluster()


@pytest.fixture
def show(tmp_path) -> Path:
    (tmp_path / "show.sh").write_text(SHOW)
    return tmp_path


def _seen(run: dict) -> Dict[int, dict]:
    """{rank: what it printed} from the run's rank logs."""
    out = {}
    for log in (Path(run["dir"]) / "logs").glob("rank_*.log"):
        m = SEEN.search(log.read_text())
        assert m, log.read_text()
        out[int(m.group(1))] = {"host": m.group(2), "devices": m.group(3), "start": float(m.group(4)),
                                "ended": float(m.group(5))}
    return out


def test_two_ranks_with_a_gpu_each_see_different_devices(home, show):
    r = run_mltrain("job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM, "distribution=pytorch",
                    "distribution.process_count_per_node=2", "distribution.backend=gloo", "compute.gpus_per_task=1",
                    cwd=show, timeout=120)
    assert r.rc == 0, r.out + r.err
    (run,) = runs(home)
    seen = _seen(run)
    assert sorted(seen) == [0, 1]
    devices = [seen[rank]["devices"] for rank in (0, 1)]
    assert all(re.fullmatch(r"\d", d) for d in devices) and devices[0] != devices[1], devices  # one each, Slurm's
    shown = run_mltrain("runs", "show", run["id"], cwd=show).out
    for rank in (0, 1):  # run.json and `runs show` say what the rank saw, on which node
        assert run["ranks"][str(rank)]["devices"] == seen[rank]["devices"]
        assert run["ranks"][str(rank)]["host"] == seen[rank]["host"]
        assert f"rank {rank}:    exit code 0 on {seen[rank]['host']}, GPUs {seen[rank]['devices']}" in shown, shown


def test_a_sweep_of_eight_one_gpu_members_four_at_a_time_never_shares_a_device(home, show):
    r = run_mltrain("-m", "job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM,
                    "compute.gpus_per_node=1", "compute.array_parallelism=4", "+job.params.sleep=1.5",
                    "+job.params.i=range(0,8)", cwd=show, timeout=180)
    assert r.rc == 0, r.out[-3000:] + r.err
    members = runs(home)
    assert len(members) == 8 and all(m["status"] == "Completed" for m in members)
    seen: List[dict] = [_seen(m)[0] for m in members]
    for m, s in zip(members, seen):
        assert re.fullmatch(r"\d", s["devices"]) and m["ranks"]["0"]["devices"] == s["devices"]
    for a, b in itertools.combinations(seen, 2):
        if a["start"] < b["ended"] and b["start"] < a["ended"]:  # ran at the same time: never on the same device
            assert a["devices"] != b["devices"], (a, b)
    # several at once for real (else the check above proves nothing), on every declared device
    most = max(sum(1 for o in seen if o["start"] <= s["start"] < o["ended"]) for s in seen)
    assert most >= 3, seen
    assert {s["devices"] for s in seen} == {"0", "1", "2", "3"}


def test_a_packed_member_records_the_devices_it_saw(home, show):
    r = run_mltrain("-m", "job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM,
                    "compute.pack=1", "compute.gpus_per_node=1", "+job.params.i=0,1", cwd=show, timeout=120)
    assert r.rc == 0, r.out[-3000:] + r.err
    for m in runs(home):
        saw = _seen(m)[0]
        assert re.fullmatch(r"\d", saw["devices"])
        assert (m["ranks"]["0"]["devices"], m["ranks"]["0"]["host"]) == (saw["devices"], saw["host"])


def test_more_gpus_than_a_node_has_is_refused_before_anything_is_submitted(home, show):
    r = run_mltrain("job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM,
                    "compute.gpus_per_task=8", cwd=show)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert r.err.startswith("mltrain: error: compute.gpus_per_task: 8 per task x 1 task per node = 8 GPUs per node "
                            "asked of Slurm partition 'debug', whose nodes have at most 4"), r.err
    assert leftovers(home) == []
    # a sweep too, from its first member, before any member exists
    r = run_mltrain("-m", "job=command", "job.command=true", *SLURM, "compute.gpus_per_node=5", "+job.params.i=0,1",
                    cwd=show)
    assert r.rc == 2 and r.err.strip() == ("mltrain: error: compute.gpus_per_node: 5 GPUs per node asked of Slurm "
                                           "partition 'debug', whose nodes have at most 4"), r.err
    assert leftovers(home) == []


def test_two_nodes_of_two_ranks_each_with_a_gpu_per_rank(home, show):
    """scripts/slurm_two_nodes.sh declares 4 GPUs on each of its nodes (n1, n2): every node's ranks get devices of
    their own node, different from each other's, and run.json says which node each rank was on."""
    import os

    from support import require

    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    r = run_mltrain("job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM, "distribution=pytorch",
                    "distribution.node_count=2", "distribution.process_count_per_node=2", "distribution.backend=gloo",
                    "compute.gpus_per_task=1", cwd=show, timeout=120, env={"SLURM_CONF": conf})
    assert r.rc == 0, r.out + r.err
    (run,) = runs(home)
    seen = _seen(run)
    by_node: Dict[str, List[str]] = {}
    for rank, saw in seen.items():
        by_node.setdefault(saw["host"], []).append(saw["devices"])
        assert (run["ranks"][str(rank)]["host"], run["ranks"][str(rank)]["devices"]) == (saw["host"], saw["devices"])
    assert sorted(by_node) == ["n1", "n2"]
    assert all(len(set(devices)) == 2 and all(re.fullmatch(r"\d", d) for d in devices) for devices in by_node.values())


@pytest.mark.no_cluster
def test_gpu_keys_that_disagree_are_refused_in_one_line(home, show):
    r = run_mltrain("job=command", "job.command=true", *SLURM, "distribution=pytorch",
                    "distribution.process_count_per_node=2", "compute.gpus_per_task=1", "compute.gpus_per_node=4",
                    cwd=show)
    assert r.rc == 2 and r.err.strip() == (
        "mltrain: error: compute.gpus_per_task: 1 per task x 2 tasks per node (distribution.process_count_per_node) "
        "= 2, but compute.gpus_per_node=4; set one of the two, or make them agree"), r.err
    r = run_mltrain("job=command", "job.command=true", *SLURM, "compute.gpus_per_task=1", "compute.gpu_bind=single",
                    cwd=show)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1
    assert r.err.startswith("mltrain: error: compute.gpu_bind: 'single' is not a Slurm --gpu-bind value (allowed: "), r.err
    assert leftovers(home) == []


@pytest.mark.no_cluster
def test_dry_run_shows_the_gpu_request_and_binding(home, show):
    r = run_mltrain("--dry-run", "job=command", "job.command=true", *SLURM, "distribution=pytorch",
                    "distribution.process_count_per_node=2", "compute.gpus_per_task=8",
                    "compute.gpu_bind='verbose,closest'",  # quoted: a bare comma is a Hydra sweep
                    cwd=show)
    assert r.rc == 0, r.err  # no cluster asked: 8 per task is only refused where Slurm can say what nodes have
    assert "#SBATCH --gpus-per-task=8" in r.out
    srun = next(line for line in r.out.splitlines() if line.strip().startswith("srun "))
    assert "--gpu-bind=verbose,closest" in srun and leftovers(home) == []


def test_what_slurm_reports_for_a_run_is_what_run_json_keeps(home, show):
    """Each rank's report (ranks/rank_N.json), written in its Slurm task, is what run.json copies."""
    r = run_mltrain("job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM,
                    "compute.gpus_per_node=2", cwd=show, timeout=120)
    assert r.rc == 0, r.out + r.err
    (run,) = runs(home)
    report = json.loads((Path(run["dir"]) / "ranks" / "rank_0.json").read_text())
    saw = _seen(run)[0]
    assert report["devices"] == saw["devices"] == run["ranks"]["0"]["devices"]
    assert re.fullmatch(r"\d,\d", saw["devices"])  # both of the node's GPUs it was given, seen by its one rank


# ------------------------------------------------------------------ GPU slots in a packed worker (compute.pack_slots)


def test_a_packed_worker_with_four_gpu_slots_runs_four_members_at_once_on_four_devices(home, show):
    r = run_mltrain("-m", "job=command", "job.command=bash show.sh", "job.source_directory=.", *SLURM,
                    "compute.pack=1", "compute.pack_slots=4", "compute.gpus_per_node=1", "+job.params.sleep=1.5",
                    "+job.params.i=range(0,8)", cwd=show, timeout=120)
    assert r.rc == 0, r.out[-3000:] + r.err
    members = runs(home)
    assert len(members) == 8 and all(m["status"] == "Completed" for m in members)
    assert len({m["slurm"]["job_id"] for m in members}) == 1  # one worker job held the 4 GPUs and ran all 8
    seen = [_seen(m)[0] for m in members]
    for m, s in zip(members, seen):
        assert re.fullmatch(r"\d", s["devices"]) and m["ranks"]["0"]["devices"] == s["devices"]
    for a, b in itertools.combinations(seen, 2):
        if a["start"] < b["ended"] and b["start"] < a["ended"]:
            assert a["devices"] != b["devices"], (a, b)
    most = max(sum(1 for o in seen if o["start"] <= s["start"] < o["ended"]) for s in seen)
    assert most == 4 and {s["devices"] for s in seen} == {"0", "1", "2", "3"}, seen
    span = max(s["ended"] for s in seen) - min(s["start"] for s in seen)
    assert span < 2 * 1.5 * 1.5, span  # two rounds of four, not eight one after another


def _usr2_to_a_slotted_worker(home: Path, project: Path, script: str, then: str, *extra: str) -> None:
    """Two members of `script` in one worker's two slots; once both print `waiting attempt=0`, Slurm's checkpoint
    signal to the worker; until both members' logs hold `then`. The driver and every worker are stopped after."""
    import subprocess

    from support import mltrain_exe, until

    driver = subprocess.Popen(mltrain_exe() + ["-m", "job=script", f"job.script={script}", *SLURM, "compute.pack=1",
                                               "compute.pack_slots=2", *extra, "compute.timeout_min=5",
                                               "+job.params.i=0,1"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def logs(text: str) -> int:
        return sum(text in (Path(m["dir"]) / "logs" / "rank_0.log").read_text()
                   for m in runs(home) if (Path(m["dir"]) / "logs" / "rank_0.log").is_file())

    try:
        until(lambda: logs("waiting attempt=0") == 2, 60, "both slots' members waiting")
        (worker,) = {m["slurm"]["job_id"] for m in runs(home)}  # one worker runs both
        subprocess.run(["scancel", "--signal=USR2", worker], check=True)
        until(lambda: logs(then) == 2, 30, f"'{then}' in both members")
    finally:
        driver.terminate()  # the driver cancels what it started
        try:
            driver.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            driver.kill()
        workers = [p.stem for p in home.glob("runs/_sweeps/*/pack/*/workers/*")]
        if workers:  # a requeued worker and its successors, whatever the driver's end left
            subprocess.run(["scancel", *workers], check=False)


def test_slurm_usr2_to_a_worker_with_slots_reaches_every_member(home, project):
    """Slurm's checkpoint signal reaches every slot's program as SIGUSR1 with checkpoint_requested, as it reaches
    an unpacked rank's: the slots' programs survive the USR2 itself (they start with it blocked)."""
    _usr2_to_a_slotted_worker(home, project, "usr1_note.py", "got SIGUSR1 attempt=0 checkpoint_requested=True",
                              "compute.gpus_per_node=1")


def test_one_member_canceled_in_a_slotted_worker_stops_that_member_only(home, show):
    import subprocess

    from support import mltrain_exe, until

    driver = subprocess.Popen(mltrain_exe() + ["-m", "job=command", "job.command=bash show.sh", "job.source_directory=.",
                                               *SLURM, "compute.pack=1", "compute.pack_slots=2", "compute.gpus_per_node=1",
                                               "+job.params.sleep=60,3"],
                              cwd=show, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: len(runs(home)) == 2 and all(m["status"] == "Running" for m in runs(home)), 60, "both running")
        long = next(m for m in runs(home) if m["sweep"]["index"] == 0)
        assert run_mltrain("runs", "cancel", long["id"], cwd=show).rc == 0
        out, err = driver.communicate(timeout=60)
    finally:
        driver.kill()
    members = sorted(runs(home), key=lambda m: m["sweep"]["index"])
    assert [m["status"] for m in members] == ["Canceled", "Completed"], out[-2000:] + err
    assert members[0]["slurm"]["job_id"] == members[1]["slurm"]["job_id"]  # side by side in one worker
    # the worker's two slots, a device each: which two of the node's four Slurm gave the worker depends on what
    # else holds devices at that moment (a job of the test before may still be ending)
    slots = {_seen(members[1])[0]["devices"], members[0]["ranks"]["0"]["devices"]}
    assert len(slots) == 2 and slots <= {"0", "1", "2", "3"}, slots


def test_the_members_of_a_slotted_worker_lost_without_a_word_run_again(home, tmp_path):
    """A worker killed outright (as with its node) while both its slots run members: both run again, once, in
    another worker (the driver finds it by its stopped heartbeat: about 15 s)."""
    import os
    import subprocess

    from support import mltrain_exe, until

    driver = subprocess.Popen(mltrain_exe() + ["-m", "job=command", 'job.command="sleep 3; echo done ${job.params.i}"',
                                               *SLURM, "compute.pack=1", "compute.pack_slots=2", "compute.gpus_per_node=1",
                                               "+job.params.i=range(0,2)"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: [m["status"] for m in runs(home)] == ["Running"] * 2, 60, "both slots running")
        victim = runs(home)[0]
        worker = victim["slurm"]["job_id"]
        alive = Path(victim["slurm"]["pack"]) / "workers" / f"{worker}.alive"
        os.kill(int(alive.read_text().split()[1]), 9)
        out, err = driver.communicate(timeout=120)
    finally:
        driver.kill()
    assert driver.returncode == 0, out[-3000:] + err
    for m in runs(home):
        assert m["status"] == "Completed" and m["slurm"]["job_id"] != worker and len(m["attempts"]) == 1, m
        assert (Path(m["dir"]) / "logs" / "rank_0.log").read_text().strip().endswith(f"done {m['sweep']['index']}")


def test_a_requeued_workers_members_finish_saving_and_their_last_lines_reach_their_logs(home, project):
    """A packed worker requeued by Slurm's checkpoint signal waits, as an unpacked rank does, for each slot's program
    to end after its SIGUSR1 (here a second of saving) before it exits: the programs are not killed mid-save, and
    what they print as they save reaches their logs (CI of 2026-12-07: a member's last line was lost)."""
    _usr2_to_a_slotted_worker(home, project, "usr1_saves.py", "saved attempt=0")
