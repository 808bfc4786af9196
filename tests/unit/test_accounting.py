"""Slurm's accounting read into run statuses, on recorded `sacct -X -n -P -o JobID,State,Start,End` text."""
import time

from mltrain.backends.slurm import accounting
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, RUNNING

RECORDED = """\
14_0|COMPLETED|2026-11-22T08:20:24|2026-11-22T08:20:25
14_1|RUNNING|2026-11-22T08:20:24|Unknown
14_[2-4]|PENDING|Unknown|Unknown
15|CANCELLED by 0|2026-11-22T08:21:00|2026-11-22T08:21:07
16|TIMEOUT|2026-11-22T08:00:00|2026-11-22T09:00:00
17|OUT_OF_MEMORY|2026-11-22T08:00:00|2026-11-22T08:00:03
"""


def test_states_statuses_and_times_from_recorded_sacct():
    ids = ["14_0", "14_1", "14_3", "15", "16", "17", "99"]
    got = accounting.parse(RECORDED, ids)
    assert {k: v.status for k, v in got.items()} == {
        "14_0": COMPLETED, "14_1": RUNNING, "14_3": QUEUED, "15": CANCELED, "16": FAILED, "17": FAILED,
        "99": None}
    assert got["15"].state == "CANCELLED" and got["99"].state == "UNKNOWN"
    assert got["14_0"].end - got["14_0"].start == 1.0
    assert got["14_0"].start == time.mktime(time.strptime("2026-11-22T08:20:24", "%Y-%m-%dT%H:%M:%S"))
    assert got["14_1"].end is None and got["14_3"].start is None


def test_requeued_and_preempted_jobs_are_queued_again():
    got = accounting.parse("20|REQUEUED|Unknown|Unknown\n21|PREEMPTED|x|y\n", ["20", "21"])
    assert got["20"].status == QUEUED and got["21"].status == QUEUED and got["21"].start is None


def test_a_job_requeued_after_a_node_failure_is_reported_node_fail_with_its_nodes():
    # sacct -X -D: one line per attempt, oldest first; Slurm requeued job 30 after its node died
    text = "30|NODE_FAIL|2026-11-24T22:30:00|2026-11-24T22:30:40|n[1-2]\n30|PENDING|Unknown|Unknown|None assigned\n" \
           "31|TIMEOUT|2026-11-24T22:00:00|2026-11-24T22:10:00|n1\n31|RUNNING|2026-11-24T22:10:20|Unknown|n1\n"
    got = accounting.parse(text, ["30", "31"])
    assert got["30"].state == "NODE_FAIL" and got["30"].status == FAILED and got["30"].nodes == "n[1-2]"
    assert got["31"].state == "RUNNING"  # a requeue after a time limit runs on: the latest attempt stands


def test_a_loss_slurm_repaired_before_the_look_is_kept_among_the_incarnations():
    # sacct -X -D: the job's first incarnation ended NODE_FAIL on n1; Slurm requeued it and it ran again on n2
    # before anyone looked (issue 63): its state is the last incarnation's, the loss is still listed
    # (40's lines are the two-node test cluster's own, for its job 4)
    text = "40|NODE_FAIL|2026-12-02T13:32:24|2026-12-02T13:32:52|n1\n40|COMPLETED|2026-12-02T13:33:07|2026-12-02T13:33:26|n2\n" \
           "41|NODE_FAIL|2026-12-02T13:32:24|2026-12-02T13:32:52|n1\n41|PENDING|Unknown|Unknown|None assigned\n" \
           "42|COMPLETED|2026-12-02T13:33:07|2026-12-02T13:33:26|n2\n"
    got = accounting.parse(text, ["40", "41", "42"])
    assert got["40"].state == "COMPLETED" and got["40"].nodes == "n2" and got["40"].incarnations == 2
    [lost] = got["40"].node_fails
    assert lost.state == "NODE_FAIL" and lost.nodes == "n1"
    assert lost.end == time.mktime(time.strptime("2026-12-02T13:32:52", "%Y-%m-%dT%H:%M:%S"))
    assert got["41"].state == "NODE_FAIL" and [f.end for f in got["41"].node_fails] == [got["41"].end]
    assert got["42"].node_fails == () and got["42"].incarnations == 1
