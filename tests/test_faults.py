"""Faults underneath a run, survived: a cancel issued before Slurm's job id is known, the `mltrain`
driver killed with SIGKILL, a full disk, fifty runs finishing at once. Real processes, a real Slurm
cluster, a real tmpfs: each test asserts what the user notices (the final status and its message,
no process left behind, nothing already written lost). The figures in the README's fault table come
from these tests (`-s` prints them)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest
from slurm_support import require_cluster, sacct_settles
from support import only_run, runs

import mltrain


@pytest.fixture(autouse=True)
def _in_project(project, monkeypatch):
    monkeypatch.chdir(project)


def test_a_cancel_right_after_a_detached_slurm_submit_is_never_lost(home, project):
    require_cluster()
    run = mltrain.submit("command", ["job.command=sleep 20", "compute=slurm", "run.detach=true"], cwd=str(project))
    known_before = run.record.get("slurm")  # usually none yet: sbatch has not answered
    status = run.cancel()
    final = run.wait(raise_on_error=False, timeout=120)
    record = only_run(home)
    assert final == "Canceled" and record["status"] == "Canceled", (status, record)
    assert "canceled by the user" in record["error"]
    assert "Running" not in record["phases"] or "Completed" not in record["phases"]
    if record.get("slurm"):  # submitted, then scancelled: Slurm says so too
        assert sacct_settles(record["slurm"]["job_id"], timeout=60) == "CANCELLED"
    print(f"\ncancel issued with the job id {'known' if known_before else 'not yet known'}; cancel returned {status}")
