"""Deferred members on the real test cluster (issue 36, mltrain.launch.deferred): a detached, packed sweep
over values makes and queues its first member, and the worker that takes each other member makes it then
(its run folder, its frozen config, its snapshot copied from the first member's), so that 10,000 members
queue in seconds. Each member still ends with its own record, values and logs; a value the config refuses
stops the sweep before anything is queued, and one only freezing refuses ends that member Failed, alone."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from slurm_support import require_cluster
from support import run_mltrain, runs, until

pytestmark = pytest.mark.slurm

PACKED = ["compute=slurm", "compute.poll_s=0.3", "--detach"]


def _members(home: Path) -> list:
    return sorted(runs(home), key=lambda run: run["sweep"]["index"])


def _ended(home: Path, count: int) -> list:
    members = _members(home)
    return members if len(members) == count and all(m["status"] in ("Completed", "Failed") for m in members) else []


def test_a_detached_packed_sweep_has_its_workers_make_its_members_as_each_starts(home, tmp_path):
    require_cluster()
    (tmp_path / "data.txt").write_text("as submitted\n")
    r = run_mltrain("-m", "job=command", 'job.command="sleep 1; echo member ${job.params.i}; cat data.txt"',
                    "compute.pack=1", "+job.params.i=range(0,4)", *PACKED, cwd=tmp_path)
    assert r.rc == 0, r.out + r.err
    at_once = runs(home)  # one worker, busy with the first member for a second: nothing else is made yet
    (tmp_path / "data.txt").write_text("edited while the members waited\n")
    assert [m["sweep"]["index"] for m in at_once] == [0], at_once
    assert "3 more members are queued" in r.out
    summary = json.loads((Path(at_once[0]["sweep"]["dir"]) / "summary.json").read_text())
    assert [row["index"] for row in summary] == [0, 1, 2, 3] and len({row["run_dir"] for row in summary}) == 4
    waiting = run_mltrain("runs", "status", summary[3]["run_id"], cwd=tmp_path)  # not made yet: said so, in one line
    assert waiting.rc != 0 and len(waiting.err.strip().splitlines()) == 1, waiting.err
    assert "is queued: its run folder is made when a worker starts it" in waiting.err, waiting.err
    members = until(lambda: _ended(home, 4), 120, "four members ended")
    assert [m["dir"] for m in members] == [row["run_dir"] for row in summary]  # each where the summary said
    for m in members:
        assert m["status"] == "Completed", m
        assert m["sweep"]["dir"] == at_once[0]["sweep"]["dir"]
        log = (Path(m["dir"]) / "logs" / "rank_0.log").read_text().split("\n")
        assert log[:2] == [f"member {m['sweep']['index']}", "as submitted"], log  # the source as submitted
    assert len({m["slurm"]["job_id"] for m in members}) == 1  # one worker ran all four


def test_a_value_only_freezing_refuses_fails_its_member_alone_and_it_cannot_be_resumed(home, tmp_path):
    require_cluster()
    r = run_mltrain("-m", "job=command", "job.command=true", "compute.pack=2", "trainer.epochs=1,abc,3", *PACKED,
                    cwd=tmp_path)
    assert r.rc == 0, r.out + r.err
    members = until(lambda: _ended(home, 3), 120, "three members ended")
    assert [m["status"] for m in members] == ["Completed", "Failed", "Completed"]
    assert "config was refused" in members[1]["error"] and "trainer.epochs" in members[1]["error"]
    again = run_mltrain("runs", "resume", members[1]["id"], cwd=tmp_path)
    assert again.rc != 0 and len(again.err.strip().splitlines()) == 1 and "never made" in again.err, again.err


def test_a_value_the_config_refuses_stops_the_sweep_before_anything_is_queued(home, tmp_path):
    require_cluster()
    before = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    # the built-in trainer's epochs are typed in the composed config: the second member's value is refused
    # there, by the driver, although the first member (made and checked in full) is fine
    r = run_mltrain("-m", "trainer.epochs=1,abc", "compute.pack=2", *PACKED, cwd=tmp_path)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1 and "trainer.epochs" in r.err, r.err
    assert runs(home) == []
    after = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, check=True).stdout
    assert set(after.split()) <= set(before.split())  # no worker was submitted


def test_runs_cancel_of_a_sweep_ends_every_member_and_its_workers(home, tmp_path):
    require_cluster()
    r = run_mltrain("-m", "job=command", 'job.command="sleep 30"', "compute.pack=2", "+job.params.i=range(0,40)",
                    *PACKED, cwd=tmp_path)
    assert r.rc == 0, r.out + r.err
    running = until(lambda: [m for m in runs(home) if m["status"] == "Running"], 60, "a member running")
    sweep = Path(running[0]["sweep"]["dir"])
    stop = run_mltrain("runs", "cancel", sweep.name, cwd=tmp_path)
    assert stop.rc == 0, stop.err
    made = runs(home)
    assert 1 <= len(made) < 40  # the members no worker had made never were
    assert all(m["status"] == "Canceled" for m in made), [m["status"] for m in made]
    assert "40 member(s) Canceled" in stop.out, stop.out
    rows = json.loads((sweep / "summary.json").read_text())
    assert len(rows) == 40 and {row["status"] for row in rows} == {"Canceled"}
    never = next(row for row in rows if not Path(row["run_dir"]).exists())
    said = run_mltrain("runs", "status", never["run_id"], cwd=tmp_path)
    assert said.rc != 0 and "ended Canceled before a worker made it" in said.err, said.err
    workers = {m["slurm"]["job_id"] for m in made}
    until(lambda: not set(subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split())
          & workers, 60, "the workers gone")  # an emptied queue: each leaves
    # MLflow's copy: the sweep's parent run ends Canceled, though most of its members were never made
    assert run_mltrain("runs", "sync", cwd=tmp_path).rc == 0
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    store = MlflowClient(tracking_uri=uri, registry_uri=uri)
    member = store.get_run(json.loads((Path(made[0]["dir"]) / "run.json").read_text())["mlflow"]["run_id"])
    parent = store.get_run(member.data.tags["mlflow.parentRunId"])
    assert parent.info.status == "KILLED" and parent.data.tags["mltrain.status"] == "Canceled", parent.data.tags
