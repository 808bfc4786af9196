"""A cancel that reaches a local run as its ranks end by themselves (issue 63, the campaign's seed 149: a sweep's
SIGTERM as a member's script ended) stops nothing: when every rank had already exited 0 the run is Completed, not
Canceled, so that `runs resume` does not run its work again. A rank the cancel stopped keeps the run Canceled, even
if it exited 0 (a trainer that saves and exits on SIGTERM)."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from mltrain.backends.base import Outcome
from mltrain.backends.local.supervisor import LocalSupervisor
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED


def _rank(code: int, terminated: bool = False) -> SimpleNamespace:
    proc = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({code})"])
    proc.wait()
    return SimpleNamespace(proc=proc, terminated=terminated)


def _settled(outcome: Outcome, *ranks: SimpleNamespace) -> str:
    lines: list = []
    supervisor = SimpleNamespace(ranks=list(ranks), log=SimpleNamespace(info=lines.append))
    return LocalSupervisor._settled(supervisor, outcome).status  # type: ignore[arg-type]


def test_a_cancel_after_every_rank_ended_well_leaves_the_run_completed():
    assert _settled(Outcome(CANCELED, error="the sweep was canceled"), _rank(0), _rank(0)) == COMPLETED


def test_a_cancel_that_stopped_a_rank_or_found_one_failed_stays_canceled():
    assert _settled(Outcome(CANCELED), _rank(0), _rank(0, terminated=True)) == CANCELED
    assert _settled(Outcome(CANCELED), _rank(0), _rank(3)) == CANCELED
    assert _settled(Outcome(FAILED, error="rank 1 exited 3"), _rank(0), _rank(3)) == FAILED


def test_slurm_ranks_ended_by_themselves_only_when_each_exited_0_and_no_stop_signal_reached_it(tmp_path):
    from mltrain.ranks import reports

    for rank in (0, 1):
        reports.write(tmp_path, rank, attempt=0, exit_code=0, ended=1.0)
    assert reports.ended_by_themselves(tmp_path, 2)
    reports.write(tmp_path, 1, stopped_by_signal=True)  # a program that saves and exits 0 on Slurm's SIGTERM
    assert not reports.ended_by_themselves(tmp_path, 2)
    reports.write(tmp_path, 1, stopped_by_signal=None, exit_code=-15)
    assert not reports.ended_by_themselves(tmp_path, 2)
    reports.write(tmp_path, 1, exit_code=None)  # still running
    assert not reports.ended_by_themselves(tmp_path, 2)
    assert not reports.ended_by_themselves(tmp_path, 3)  # a rank that never reported
