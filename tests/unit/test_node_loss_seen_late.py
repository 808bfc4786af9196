"""A node lost and repaired by Slurm before mltrain looked (issue 63): Slurm requeued the job and started it again
on the other node between two looks, so no `sacct` ever showed it waiting after its NODE_FAIL. The loss is read
from the job's earlier incarnations (`sacct -D` lists each apart) and recorded once, however often it is seen.
The backend's real refresh, settle and node_loss code runs; only sacct, sinfo's word on the lost node and scancel
are replaced by recorded answers, as in test_handle_on_recorded_sacct.py."""
import time

import pytest

from mltrain.backends.slurm import accounting, node_loss
from mltrain.backends.slurm.run_part import SlurmJob
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import COMPLETED, FAILED, RUNNING
from mltrain.python_api.handle import Run
from mltrain.ranks import reports
from mltrain.runs.record import RunRecord

from .jobs import frozen_job

# The two-node test cluster's own answer for such a job (`sacct -j 4 -X -D -n -P -o JobID,State,Start,End,NodeList`,
# after tests/test_faults_slurm.py's run with compute.poll_s=300): its first incarnation ran on n1 until n1 died;
# Slurm requeued it (Reason BeginTime, Restarts=1) and ran it again on n2 15 s later.
LOST = "4|NODE_FAIL|2026-12-02T13:32:24|2026-12-02T13:32:52|n1\n"
AGAIN = LOST + "4|RUNNING|2026-12-02T13:33:07|Unknown|n2\n"
DONE = LOST + "4|COMPLETED|2026-12-02T13:33:07|2026-12-02T13:33:26|n2\n"


def _when(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def _running(tmp_path, **compute) -> RunRecord:
    """A detached run as Slurm job 4, Running (on n1) since before the recorded accounting."""
    job = frozen_job("slurm", run_dir=str(tmp_path / "r1"), run_id="r1", per_node=1,
                     compute=SlurmComputeConf(partition="two", **compute))
    record = RunRecord.create(job)
    record.doc.created = _when("2026-11-22T08:20:00")  # the run exists before accounting's answers below
    record.doc.phases = {k: _when("2026-11-22T08:20:00") for k in record.doc.phases}
    record.set_status(RUNNING, at=_when("2026-12-02T13:32:25"),
                      backend_parts=SlurmJob("4", str(tmp_path / "r1" / "submitit")).to_parts(), detached=True,
                      driver_pid=None)
    return record


@pytest.fixture
def slurm(monkeypatch):
    """Accounting's recorded answer (each call logged), the lost node as sinfo names it, and scancel's calls."""
    said = {"text": "", "asked": [], "cancelled": []}

    def query(ids):
        said["asked"].append(list(ids))
        return accounting.parse(said["text"], ids) if said["text"] else {}

    monkeypatch.setattr(accounting, "query", query)
    monkeypatch.setattr(accounting, "query_shared", lambda ids, fresh_s: accounting.query(ids) if ids else {})
    monkeypatch.setattr(accounting, "lost_nodes", lambda nodes: [f"{nodes} (Not responding)"])
    monkeypatch.setattr(accounting, "scancel", lambda ids: said["cancelled"].extend(ids))
    return said


def test_a_loss_slurm_repaired_before_the_look_is_recorded_once(tmp_path, slurm):
    record = _running(tmp_path)
    slurm["text"] = AGAIN  # the first look after the loss: the job already runs again, on n2
    assert Run(record.dir).status == RUNNING
    slurm["text"] = DONE  # seen again at the next look, and at the end
    assert Run(record.dir).status == COMPLETED
    done = RunRecord.load(record.dir)
    [failure] = done.doc.node_failures
    assert failure["then"] == node_loss.BY_SLURM and failure["then"].startswith(node_loss.REPLACED)
    assert failure["lost"] == ["n1 (Not responding)"] and failure["nodes"] == "n1" and failure["excluded"] == ["n1"]
    assert failure["attempt"] == 0 and failure["job_id"] == "4" and failure["end"] == _when("2026-12-02T13:32:52")
    assert done.error is None and not slurm["cancelled"]


def test_a_late_loss_counts_once_towards_max_node_failures(tmp_path, slurm):
    # n1 lost and replaced by mltrain (it saw the job wait); then n2 lost and repaired by Slurm before a look
    record = _running(tmp_path, max_node_failures=2)
    record.update(node_failures=[{"attempt": 0, "job_id": "4", "lost": ["n1"], "nodes": "n1", "excluded": ["n1"],
                                  "end": _when("2026-12-02T13:32:52"), "then": node_loss.REPLACED}])
    slurm["text"] = LOST + "4|NODE_FAIL|2026-12-02T13:33:07|2026-12-02T13:33:40|n2\n" \
                           "4|RUNNING|2026-12-02T13:33:55|Unknown|n3\n"
    for _ in range(2):
        assert Run(record.dir).status == RUNNING
    first, second = RunRecord.load(record.dir).doc.node_failures
    assert second["attempt"] == 1 and second["nodes"] == "n2" and second["excluded"] == ["n1", "n2"]
    assert second["then"] == node_loss.BY_SLURM


def test_a_late_loss_beyond_max_node_failures_ends_the_run_as_a_seen_one_would(tmp_path, slurm):
    record = _running(tmp_path, max_node_failures=0)  # 0: a lost node fails the run
    slurm["text"] = AGAIN
    assert Run(record.dir).status == FAILED
    done = RunRecord.load(record.dir)
    assert done.error.startswith("Slurm job 4 ended NODE_FAIL: lost node n1 (Not responding); stopped: "
                                 "compute.max_node_failures=0 used up"), done.error
    assert slurm["cancelled"] == ["4"] and len(done.doc.node_failures) == 1


def test_an_older_job_that_had_this_jobs_id_is_not_its_loss(tmp_path, slurm):
    """Slurm reuses job ids (its counter started again; its accounting kept the older job): sacct -D then lists
    that job's NODE_FAIL beside this one's incarnations. It ended before this run existed, so it is not this run's
    loss and uses up nothing (chaos seed 152, third pass: it used up compute.max_node_failures=1, and the run's own
    loss then ended it)."""
    record = _running(tmp_path, max_node_failures=1)
    record.doc.created = _when("2026-12-02T13:33:00")  # made after the older job 4 lost n1
    record.update(created=record.doc.created)
    slurm["text"] = DONE  # the older job's NODE_FAIL, then this run's job 4, which completed
    assert Run(record.dir).status == COMPLETED
    done = RunRecord.load(record.dir)
    assert done.doc.node_failures == [] and done.error is None and not slurm["cancelled"]


def _ended_well(record: RunRecord, attempt: int) -> None:
    """Rank 0's report of its attempt `attempt`, exit code 0: the run has Completed, whatever accounting says."""
    reports.write(record.dir, 0, attempt=attempt, exit_code=0, started=time.time() - 20, ended=time.time() - 1)


def test_a_run_its_ranks_ended_looks_back_waiting_for_accounting_to_list_every_attempt(tmp_path, slurm, monkeypatch):
    record = _running(tmp_path)
    _ended_well(record, attempt=1)
    answers = iter([LOST, DONE])  # slurmdbd had not been handed the second incarnation yet at the first ask
    monkeypatch.setattr(accounting, "query", lambda ids: slurm["asked"].append(ids) or accounting.parse(next(answers), ids))
    assert Run(record.dir).status == COMPLETED
    assert len(slurm["asked"]) == 2
    [failure] = RunRecord.load(record.dir).doc.node_failures
    assert failure["then"] == node_loss.BY_SLURM and failure["nodes"] == "n1"


def test_the_look_back_waits_briefly_never_for_ever(tmp_path, slurm, monkeypatch):
    monkeypatch.setattr(accounting, "LOOK_BACK_WAIT_S", 0.6)
    record = _running(tmp_path)
    _ended_well(record, attempt=1)
    slurm["text"] = ""  # slurmdbd not answering
    began = time.monotonic()
    assert Run(record.dir).status == COMPLETED
    assert time.monotonic() - began < 3 and len(slurm["asked"]) >= 2
    assert RunRecord.load(record.dir).doc.node_failures == []


def test_a_first_attempt_that_ended_well_asks_accounting_nothing(tmp_path, slurm):
    record = _running(tmp_path)
    _ended_well(record, attempt=0)
    assert Run(record.dir).status == COMPLETED and slurm["asked"] == []


def test_a_job_slurm_started_again_before_it_could_be_kept_off_the_lost_node_goes_on(tmp_path, slurm, monkeypatch):
    """The driver saw the NODE_FAIL, but Slurm started the requeued job on the other node before `scontrol update
    ExcNodeList` could take (it is refused for a running job): the run goes on there, the loss recorded as
    replaced by Slurm, never ended Failed with its healthy rerun cancelled."""
    record = _running(tmp_path)
    monkeypatch.setattr(node_loss, "healthy_nodes", lambda partition, excluded: ["n2"])
    monkeypatch.setattr(node_loss, "_exclude", lambda job_id, nodes: False)  # refused: the job runs already
    monkeypatch.setattr(accounting, "queue_state", lambda job_id: "RUNNING")
    job = accounting.parse(LOST, ["4"])["4"]
    said = node_loss.replace(record, job, "4")
    assert said is not None and "Slurm had already run job 4 again" in said
    entry = record.doc.node_failures[-1]
    assert node_loss.replaced(entry) and entry["then"] == node_loss.STARTED_BY_SLURM
    assert slurm["cancelled"] == []
