"""The Slurm launcher against a real single-node Slurm cluster (slurmctld, slurmd, munge, slurmdbd)."""
from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from slurm_support import require_cluster, sacct, sacct_settles
from support import leftovers, metric_rows, mltrain_exe, only_run, run_mltrain, runs, wait_for_checkpoint
from train_support import FAST, data_args, epoch_metrics, write_digits

pytestmark = pytest.mark.slow
SLURM = ["compute=slurm", "compute.poll_s=0.3"]
TWO = ["distribution=pytorch", "distribution.process_count_per_node=2"]


@pytest.fixture(autouse=True)
def _cluster(request):
    # dry runs and parameter checks talk to no cluster, so they run (and must pass) without one
    if request.node.get_closest_marker("no_cluster") is None:
        require_cluster()


@pytest.fixture
def images(tmp_path):
    return write_digits(tmp_path / "train", per_class=16), write_digits(tmp_path / "val", per_class=4, offset=100)


def test_two_rank_ddp_script_on_slurm(home, project):
    r = run_mltrain("job=script", "job.script=allreduce.py", *SLURM, *TWO,
                    "job.arguments=[--dist-url,$AZ_BATCHAI_PYTORCH_INIT_METHOD,--rank,$AZ_BATCHAI_TASK_INDEX,--world-size,2]",
                    cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed" and sacct_settles(run["slurm"]["job_id"]) == "COMPLETED"
    logs = Path(run["dir"]) / "logs"
    for rank in (0, 1):  # one log per rank in the run, not only in submitit's folder
        assert f"allreduce rank={rank} world=2 sum=3" in (logs / f"rank_{rank}.log").read_text()
    assert "allreduce rank=0 world=2 sum=3" in r.out  # rank 0 streamed while waiting
    port = json.loads(next((Path(run["dir"]) / "ranks").glob("rendezvous_*.json")).read_text())["master_port"]
    assert f"port={port}" in (logs / "rank_0.log").read_text()


def test_failing_rank_fails_the_slurm_job(home, project):
    r = run_mltrain("job=script", "job.script=fail_rank.py", *SLURM, *TWO, "+job.params.FAIL_AFTER=1",
                    cwd=project, timeout=180)
    assert r.rc == 1
    assert "rank 1 exited with code 3" in r.out and "rank 1 failing on purpose" in r.out
    run = only_run(home)
    assert run["status"] == "Failed" and run["failed_rank"] == 1
    assert sacct_settles(run["slurm"]["job_id"]) == "FAILED"  # never COMPLETED (hydra #1928)


def test_builtin_trainer_one_epoch_on_slurm(home, project, images):
    r = run_mltrain(*data_args(*images), *FAST, "trainer.epochs=1", *SLURM, *TWO, "distribution.backend=gloo",
                    cwd=project, timeout=300)
    assert r.rc == 0, r.out[-2000:] + r.err
    run = only_run(home)
    assert (Path(run["dir"]) / "outputs" / "model" / "weights.pt").is_file()
    assert 1 in epoch_metrics(run)


def test_detach_then_status_logs_cancel(home, project):
    r = run_mltrain("job=script", "job.script=sleeper.py", *SLURM, *TWO, "--detach", cwd=project, timeout=60)
    assert r.rc == 0, r.err
    run = only_run(home)
    assert "detached" in r.out and run["slurm"]["job_id"] in r.out
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = run_mltrain("runs", "status", run["id"], cwd=project)
        if "Running" in status.out:
            break
        time.sleep(0.5)
    assert "Running" in status.out
    while "sleeping" not in run_mltrain("runs", "logs", run["id"], cwd=project).out and time.monotonic() < deadline:
        time.sleep(0.5)
    assert "rank 0 sleeping" in run_mltrain("runs", "logs", run["id"], cwd=project).out
    cancel = run_mltrain("runs", "cancel", run["id"], cwd=project)
    assert cancel.rc == 0 and "Canceled" in cancel.out
    assert only_run(home)["status"] == "Canceled"
    for _ in range(60):
        if sacct(run["slurm"]["job_id"]) == "CANCELLED":
            break
        time.sleep(0.5)
    assert sacct(run["slurm"]["job_id"]) == "CANCELLED"


def test_sweep_is_one_job_array_and_a_failed_member_does_not_stop_it(home, project):
    r = run_mltrain("-m", "job=script", "job.script=fail_rank.py", *SLURM, *TWO, "+job.params.FAIL_RANK=9,0,9",
                    "+job.params.SLEEP=0", "+job.params.FAIL_AFTER=0", "compute.array_parallelism=3",
                    cwd=project, timeout=300)
    assert r.rc == 1
    found = sorted(runs(home), key=lambda x: x["sweep"]["index"])
    assert [x["status"] for x in found] == ["Completed", "Failed", "Completed"]
    job_ids = [x["slurm"]["job_id"] for x in found]
    assert len({j.split("_")[0] for j in job_ids}) == 1 and all("_" in j for j in job_ids)  # one array
    assert "sweep of 3 runs" in r.out
    for x in found:
        assert x["dir"] in r.out


def test_requeue_resumes_from_checkpoint_without_repeating_epochs(home, project, images):
    driver = subprocess.Popen(mltrain_exe() + [*data_args(*images), *FAST, "trainer.epochs=4", "trainer.patience=10",
                                               *SLURM, "compute.max_requeues=2"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run = wait_for_checkpoint(home, epoch=1)
        subprocess.run(["scontrol", "requeue", run["slurm"]["job_id"]], check=True)
        out, err = driver.communicate(timeout=300)
    finally:
        driver.kill()
    assert driver.returncode == 0, out[-3000:] + err
    run = only_run(home)
    assert run["status"] == "Completed"
    log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert "attempt 1 (requeued)" in log and "epoch(s) already done" in log
    rows = metric_rows(run["dir"])
    steps = [row["step"] for row in rows if row["name"] == "val_loss"]
    assert sorted(steps) == [1, 2, 3, 4] and len(steps) == len(set(steps)), steps
    assert run["ranks"]["0"]["attempt"] == 1


def _wait_for_log(run_dir: Path, text: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    log = run_dir / "logs" / "rank_0.log"
    while time.monotonic() < deadline:
        if log.is_file() and text in log.read_text():
            return
        time.sleep(0.2)
    raise AssertionError(f"{text!r} never reached {log}")


def test_usr2_requeues_then_too_many_timeouts_fail_saying_so(home, project):
    """Slurm's USR2 (as sent before the time limit) reaches the rank as SIGUSR1 with checkpoint_requested;
    submitit requeues; once compute.max_requeues is used up the run is Failed and says it timed out too
    many times. The signal is sent with scancel, as slurmctld would (it may send it up to a minute early)."""
    driver = subprocess.Popen(mltrain_exe() + ["job=script", "job.script=usr1_note.py", *SLURM, "compute.max_requeues=1",
                                               "compute.timeout_min=5"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not runs(home) and time.monotonic() < deadline:
            time.sleep(0.1)
        run_dir = Path(runs(home)[0]["dir"])
        for attempt in (0, 1):
            _wait_for_log(run_dir, f"waiting attempt={attempt}")
            job_id = json.loads((run_dir / "run.json").read_text())["slurm"]["job_id"]
            subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
            _wait_for_log(run_dir, f"got SIGUSR1 attempt={attempt} checkpoint_requested=True")
        out, err = driver.communicate(timeout=180)
    finally:
        driver.kill()
    assert driver.returncode == 1, out[-3000:] + err
    run = only_run(home)
    assert run["status"] == "Failed"
    assert "timed out too many times (compute.max_requeues=1" in run["error"], run["error"]
    assert "timed out too many times" in out + err


@pytest.mark.slow
def test_a_real_time_limit_sends_the_rank_sigusr1_before_it_ends(home, project):
    """No scancel here: slurmctld itself sends USR2 signal_delay_s before the 1-minute limit (it may be up
    to a minute early). The rank program survives it (Python's default for USR2 is to exit) and gets
    SIGUSR1 with checkpoint_requested; with no requeue left the run is Failed, saying it timed out."""
    r = run_mltrain("job=script", "job.script=usr1_note.py", *SLURM, "compute.timeout_min=1",
                    "compute.signal_delay_s=50", "compute.max_requeues=0", cwd=project, timeout=240)
    run = only_run(home)
    log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert "got SIGUSR1 attempt=0 checkpoint_requested=True" in log, log
    assert r.rc == 1 and run["status"] == "Failed" and "timed out too many times" in run["error"], run["error"]


GRACEFUL = """
import signal, sys, time
def stop(signum, frame):
    print("saved on SIGTERM", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("working", flush=True)
time.sleep(120)
"""


def test_ctrl_c_of_a_run_whose_program_saves_and_exits_0_on_sigterm_leaves_it_canceled(home, project):
    """A cancel that finds every rank ended with exit 0 leaves the run Completed (its work was done before the
    cancel reached it: the campaign's seed 7). A program that exits 0 because Slurm's SIGTERM reached it did
    not finish its work: its rank says a stop signal reached it, and the run stays Canceled (resume runs it)."""
    (project / "graceful.py").write_text(GRACEFUL)
    proc = subprocess.Popen([*mltrain_exe(), "job=script", "job.script=graceful.py", *SLURM], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            made = runs(home)
            log = Path(made[0]["dir"]) / "logs" / "rank_0.log" if made else None
            if log is not None and log.is_file() and "working" in log.read_text():
                break
            time.sleep(0.3)
        else:
            pytest.fail("the program never started")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    run = only_run(home)
    assert run["status"] == "Canceled", (run["status"], run.get("error"), out, err)
    assert run["ranks"]["0"]["exit_code"] == 0 and run["ranks"]["0"]["stopped_by_signal"] is True, run["ranks"]
    assert "saved on SIGTERM" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


def test_resume_a_canceled_slurm_run_on_the_cluster(home, project):
    (project / "wait_go.py").write_text(
        "import os, time\n"
        "go = os.path.join(os.environ['MLTRAIN_RUN_DIR'], 'go')\n"
        "print('waiting', flush=True)\n"
        "for _ in range(600):\n    if os.path.exists(go):\n        break\n    time.sleep(0.1)\n"
        "print('went' if os.path.exists(go) else 'gave up', flush=True)\n")
    r = run_mltrain("job=script", "job.script=wait_go.py", *SLURM, "--detach", cwd=project, timeout=60)
    assert r.rc == 0, r.err
    run = only_run(home)
    assert run_mltrain("runs", "cancel", run["id"], cwd=project).rc == 0
    first_job = run["slurm"]["job_id"]
    (Path(run["dir"]) / "go").touch()
    # the same run directory and frozen config again, as a new Slurm job (not locally)
    r = run_mltrain("runs", "resume", run["id"], cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    after = only_run(home)
    assert after["status"] == "Completed" and after["slurm"]["job_id"] != first_job
    assert after["attempts"][0]["status"] == "Canceled"
    assert "went" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


@pytest.mark.no_cluster
def test_dry_run_prints_the_batch_script(home, project):
    r = run_mltrain("--dry-run", "job=script", "job.script=show_env.py", *SLURM, *TWO, "compute.partition=debug",
                    "compute.additional_parameters={exclusive: true}", "compute.submitit={comment: nightly}",
                    cwd=project)
    assert r.rc == 0, r.err
    assert "#SBATCH --comment=nightly" in r.out  # submitit's own name, no prefix, no ++
    assert "#SBATCH --ntasks-per-node=2" in r.out and "#SBATCH --partition=debug" in r.out
    assert "--kill-on-bad-exit=1" in r.out and "#SBATCH --exclusive" in r.out
    assert "MASTER_ADDR=<first node>" in r.out and leftovers(home) == []


@pytest.mark.no_cluster
def test_unknown_submitit_parameter_is_one_line(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", *SLURM, "++compute.submitit={slurm_bogus: 1}", cwd=project)
    assert r.rc != 0 and len(r.err.strip().splitlines()) == 1
    assert r.err.startswith("mltrain: error: compute.submitit.slurm_bogus: not a submitit parameter (allowed: ")
    assert "mail_user" in r.err
    assert not (home / "runs").exists(), "refused before any run or sweep folder exists"


def test_two_nodes_for_real(home, project):
    """node_count=2 on a cluster of two Slurm nodes (network namespaces n1, n2: scripts/slurm_two_nodes.sh)."""
    import os

    from support import require

    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    r = run_mltrain("job=script", "job.script=allreduce.py", *SLURM, "distribution=pytorch",
                    "distribution.node_count=2", "distribution.process_count_per_node=1",
                    "job.arguments=[--dist-url,$AZ_BATCHAI_PYTORCH_INIT_METHOD,--rank,$AZ_BATCHAI_TASK_INDEX,--world-size,2]",
                    cwd=project, timeout=180, env={"SLURM_CONF": conf})
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    ranks = {p.stem: json.loads(p.read_text()) for p in (Path(run["dir"]) / "ranks").glob("rank_*.json")}
    assert {ranks["rank_0"]["host"], ranks["rank_1"]["host"]} == {"n1", "n2"}  # one rank per node
    rendezvous = json.loads(next((Path(run["dir"]) / "ranks").glob("rendezvous_*.json")).read_text())
    assert rendezvous["master_addr"] == ranks["rank_0"]["host"]  # the allocation's first node
    assert "allreduce rank=1 world=2 sum=3" in (Path(run["dir"]) / "logs" / "rank_1.log").read_text()


def test_sweep_members_each_print_under_their_own_prefix(home, project):
    r = run_mltrain("-m", "job=command", "job.command=echo hello from $AML_PARAMETER_who", "+job.params.who=aaa,bbb",
                    *SLURM, cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    found = sorted(runs(home), key=lambda x: x["sweep"]["index"])
    for index, (who, run) in enumerate(zip(("aaa", "bbb"), found)):
        assert f"mltrain: [#{index}] Queued: submitted as Slurm job {run['slurm']['job_id']}" in r.out
        assert f"[#{index}] hello from {who}" in r.out  # every member's rank 0 is streamed
        lines = r.out.splitlines()
        pos = {s: next(i for i, l in enumerate(lines) if l.startswith(f"mltrain: [#{index}] {s}"))
               for s in ("Queued", "Running", "Finalizing", "Completed")}
        said = next(i for i, l in enumerate(lines) if l == f"[#{index}] hello from {who}")
        assert pos["Queued"] < pos["Running"] < said < pos["Finalizing"] < pos["Completed"], r.out


def test_console_all_on_slurm_shows_every_rank(home, project):
    r = run_mltrain("job=command", "job.command=echo hi from $RANK", *SLURM, *TWO, "run.console=all",
                    cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    assert "\nhi from 0" in r.out and "[rank 1] hi from 1" in r.out
