"""The run handle of a detached Slurm run, on recorded `sacct` text: each look asks the Slurm backend,
which reads accounting and settles the record (Running, then its end with accounting's own times).
The backend's real refresh and settle code runs; only the sacct call is replaced by its recorded output
(as submitit's own tests do), so no cluster is needed and each test takes milliseconds."""
import time

import pytest

from mltrain.backends.slurm import accounting
from mltrain.backends.slurm.run_part import SlurmJob
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, RUNNING
from mltrain.python_api.handle import Run, list_runs
from mltrain.runs.record import RunRecord

from .jobs import frozen_job

PENDING = "41|PENDING|Unknown|Unknown\n"
RUNNING_TEXT = "41|RUNNING|2026-11-22T08:20:24|Unknown\n"
DONE = "41|COMPLETED|2026-11-22T08:20:24|2026-11-22T08:20:31\n"
CANCELLED = "41|CANCELLED by 0|2026-11-22T08:20:24|2026-11-22T08:20:27\n"
TIMEOUT = "41|TIMEOUT|2026-11-22T08:20:24|2026-11-22T09:20:24\n"


def _when(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


@pytest.fixture
def detached(tmp_path):
    """A run as `mltrain ... compute=slurm --detach` leaves it: queued as Slurm job 41, no driver.
    Its phases are dated before the recorded accounting, as they would be."""
    record = RunRecord.create(frozen_job("slurm", run_dir=str(tmp_path / "r1"), run_id="r1"))
    record.doc.phases = {k: _when("2026-11-22T08:20:00") for k in record.doc.phases}
    record.doc.created = _when("2026-11-22T08:20:00")
    record.set_status(QUEUED, at=_when("2026-11-22T08:20:01"), backend_parts=SlurmJob("41", str(tmp_path / "r1" / "submitit")).to_parts(),
                      detached=True, driver_pid=None)
    return record


@pytest.fixture
def sacct(monkeypatch):
    said = {"text": ""}
    monkeypatch.setattr(accounting, "query", lambda ids: accounting.parse(said["text"], ids))
    # each look here stands for a command of its own (`runs status`), which shares no earlier answer;
    # the sharing between followers in one process has its own tests (test_shared_sacct.py)
    monkeypatch.setattr(accounting, "query_shared", lambda ids, fresh_s: accounting.query(ids))
    return said


def test_a_queued_run_stays_queued_while_slurm_says_pending(detached, sacct):
    sacct["text"] = PENDING
    assert Run(detached.dir).status == QUEUED


def test_running_then_completed_with_accountings_own_times(detached, sacct):
    sacct["text"] = RUNNING_TEXT
    run = Run(detached.dir)
    assert run.status == RUNNING
    assert run.load().doc.phases[RUNNING] == _when("2026-11-22T08:20:24")
    sacct["text"] = DONE
    record = run.load()
    assert record.status == COMPLETED and record.ended_at == _when("2026-11-22T08:20:31")
    assert record.doc.outputs == []  # the manifest of outputs/ was taken at the end


def test_a_cancelled_job_ends_canceled_and_a_timeout_fails_naming_the_state(detached, sacct, tmp_path):
    sacct["text"] = CANCELLED
    assert Run(detached.dir).status == CANCELED
    other = RunRecord.create(frozen_job("slurm", run_dir=str(tmp_path / "r2"), run_id="r2"))
    other.set_status(QUEUED, backend_parts=SlurmJob("41").to_parts(), detached=True, driver_pid=None)
    sacct["text"] = TIMEOUT
    record = Run(other.dir).load()
    assert record.status == FAILED and record.error.startswith("Slurm job 41 ended TIMEOUT")


def test_no_answer_from_sacct_leaves_the_status_as_it_was(detached, sacct):
    sacct["text"] = ""  # sacct unavailable: not Failed from a missing answer
    assert Run(detached.dir).status == QUEUED


def test_runs_list_refreshes_every_run_with_one_look_per_backend(detached, sacct, monkeypatch):
    asked = []
    monkeypatch.setattr(accounting, "query", lambda ids: asked.append(ids) or accounting.parse(DONE, ids))
    runs = list_runs(detached.dir.parent)
    assert [r.status for r in runs] == [COMPLETED] and asked == [["41"]]
