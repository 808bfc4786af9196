"""Backend.submit and Backend.follow (mltrain.backends.handover): a run handed to the local backend is on its
way when submit returns, describe() says how it goes without blocking, cancel(reason) stops it with that
reason kept in its record, and a run followed without its driver is looked at no more often than the
backend's poll interval however often it is asked. Real runs: `job=command` processes on this machine."""
from __future__ import annotations

import time
from typing import List

from mltrain import backends
from mltrain.backends.handover import Followed
from mltrain.backends.local.backend import LocalBackend
from mltrain.launch.orchestrate import create_run
from mltrain.launch.request import Request, freeze_request
from mltrain.runs.console import Console
from mltrain.runs.record import RunRecord
from mltrain.runs.waiting import wait_until


def _run(command: str):
    job = freeze_request(Request(job="command", overrides=(f"job.command={command}",)))
    return job, create_run(job, Console())


def test_submit_returns_while_the_run_runs_and_cancel_keeps_the_reason(home, project):
    job, record = _run("'sleep 30'")
    backend = backends.get(job.backend)
    started = time.monotonic()
    handed = backend.submit(backend.plan(job), record, Console())
    assert time.monotonic() - started < 2.0  # the run is not waited for
    assert wait_until(lambda: handed.record.status == "Running", timeout=30)
    state = handed.describe()
    assert not state.ended and state.status == "Running"
    handed.cancel("cut by the test's policy")
    assert handed.canceling
    assert wait_until(lambda: handed.describe().ended, timeout=30)
    state = handed.describe()
    assert state.status == "Canceled" and "cut by the test's policy" in (state.error or "")
    record.reload()
    assert record.status == "Canceled" and "cut by the test's policy" in (record.doc.error or "")


def test_a_failing_run_ends_failed_with_its_ranks_exit(home, project):
    job, record = _run("'exit 3'")
    backend = backends.get(job.backend)
    handed = backend.submit(backend.plan(job), record, Console())
    assert wait_until(lambda: handed.describe().ended, timeout=60)
    state = handed.describe()
    assert state.status == "Failed" and "exit" in (state.error or "")


class _Crashing(LocalBackend):
    """The local backend with a launch that raises: mltrain's own fault, not the run's."""

    def launch(self, plans, records, consoles, cancel):
        raise KeyError("no such thing")


def test_an_internal_error_in_launch_still_ends_the_run(home, project):
    job, record = _run("true")
    backend = _Crashing()
    handed = backend.submit(backend.plan(job), record, Console())
    assert wait_until(lambda: handed.describe().ended, timeout=30)
    record.reload()
    assert record.status == "Failed" and "internal error: KeyError" in (record.doc.error or "")


class _Counting(LocalBackend):
    wait_poll_s = 0.5

    def __init__(self) -> None:
        self.looks: List[float] = []
        self.cancels: List[str] = []

    def refresh(self, records: List[RunRecord]) -> None:
        self.looks.append(time.monotonic())

    def cancel(self, record: RunRecord) -> None:  # the local one would ask the run's driver: this test
        self.cancels.append(record.id)


def test_a_followed_run_is_looked_at_once_per_poll_interval(home, project):
    job, record = _run("true")
    backend = _Counting()
    followed = Followed(backend, record)
    deadline = time.monotonic() + 1.6
    while time.monotonic() < deadline:  # asked every 10 ms, as a busy wait loop might
        assert not followed.describe().ended
        time.sleep(0.01)
    assert 3 <= len(backend.looks) <= 5, backend.looks  # 1.6 s at 0.5 s: the first look and about 3 more
    followed.cancel("stop")
    followed.cancel("stop again")  # a policy and the sweep's end may both ask: the backend is asked once
    assert followed.canceling and backend.cancels == [record.id]
