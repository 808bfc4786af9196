"""The run handle (mltrain.Run, `mltrain runs ...`) behaves the same on every backend, attached or
detached: status from the backend, wait() to the end, cancel() that really stops the ranks; and runs
written by the 0.1.0 layout still resume."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import mltrain_exe, only_run, pid_alive, run_mltrain, until

import mltrain

OLD_LAYOUT = Path(__file__).parent / "data" / "old_layout"
SLURM = ["compute=slurm", "compute.poll_s=0.3"]



def _rank_pids(run) -> list:
    ranks = mltrain.Run(run.run_dir).record["ranks"]
    return [int(info["pid"]) for info in ranks.values() if info.get("pid")]


# ----------------------------------------------------------------------------------------- local
def test_local_run_cancelled_through_the_handle(home, project):
    run = mltrain.submit("script", [f"job.source_directory={project}", "job.script=sleeper.py",
                                    "distribution=pytorch", "distribution.process_count_per_node=2"])
    until(lambda: "sleeping" in (run.run_dir / "logs" / "rank_0.log").read_text()
           if (run.run_dir / "logs" / "rank_0.log").exists() else False, 60, "rank 0 did not start")
    assert run.status == "Running"
    pids = until(lambda: _rank_pids(run) if len(_rank_pids(run)) == 2 else None, 30, "no rank pids recorded")
    waited = run_mltrain("runs", "wait", run.id, "--timeout", "1", cwd=project)
    assert waited.rc == 124 and waited.err.strip() == f"mltrain: run {run.id} still Running after 1.0s"
    assert mltrain.Run.get(run.id).cancel() == "Canceled"
    assert run.wait(raise_on_error=False) == "Canceled"
    assert not any(pid_alive(p) for p in pids)
    listed = run_mltrain("runs", "status", run.id, cwd=project)
    assert listed.out.strip() == f"{run.id} Canceled"
    waited = run_mltrain("runs", "wait", run.id, cwd=project)  # an ended run: at once, with its exit status
    assert waited.rc == 130 and waited.out.strip() == f"{run.id} Canceled"


def test_local_run_whose_driver_died_is_failed_not_running_forever(home, project):
    run = mltrain.submit("script", [f"job.source_directory={project}", "job.script=sleeper.py"])
    until(lambda: run.status == "Running", 60, "the run did not start")
    driver = run.record["driver_pid"]
    assert driver != os.getpid(), "the record names this test's own process as the run's driver"
    os.kill(driver, signal.SIGKILL)
    until(lambda: not pid_alive(driver), 10, "the driver did not die")
    assert run.wait(raise_on_error=False, timeout=30) == "Failed"
    assert run.record["error"].startswith("driver lost: the mltrain driver") and "exited before the run ended" in \
        run.record["error"]
    # its rank does not outlive it: the guard stopped it (tests/test_faults.py has the 2-rank case with children)
    until(lambda: not any(pid_alive(p) for p in _rank_pids(run)), 30, "the rank outlived its driver")


def _install_old_run(home: Path, name: str, project: Path) -> Path:
    """A run directory written by mltrain 0.1.0 (tests/data/old_layout), placed under this test's home."""
    runs = home / "runs"
    runs.mkdir(exist_ok=True)
    target = runs / name
    shutil.copytree(OLD_LAYOUT / name, target)
    shim = Path(mltrain.__file__).parent / "_azureml_shim"
    for path in target.rglob("*"):
        if path.is_file() and path.suffix in (".json", ".yaml", ".log"):
            text = path.read_text()
            for key, value in (("@SHIM@", str(shim)), ("@PYTHON@", sys.executable), ("@RUNS@", str(runs)),
                               ("@PROJ@", str(project))):
                text = text.replace(key, value)
            path.write_text(text)
    for folder in ("logs", "outputs"):  # the snapshot's ./logs and ./outputs are the run's own
        (target / "snapshot" / folder).symlink_to(Path("..") / folder)
    (target / "checkpoints").mkdir(exist_ok=True)
    return target


def test_a_run_of_the_old_layout_resumes(home, project):
    run_dir = _install_old_run(home, "oldlayout_run", project)
    status = run_mltrain("runs", "status", "oldlayout_run", cwd=project).out.splitlines()
    assert status[0] == "oldlayout_run Failed" and status[1].startswith("rank 0 exited with code 3")
    r = run_mltrain("runs", "resume", "oldlayout_run", cwd=project)
    assert r.rc == 0, r.out + r.err
    record = only_run(home)
    assert record["status"] == "Completed" and record["attempts"][0]["status"] == "Failed"
    assert "resumed: rank 1 of 2 ok" in (run_dir / "logs" / "rank_1.log").read_text()


# ----------------------------------------------------------------------------------------- slurm
@pytest.fixture
def cluster():
    from slurm_support import require_cluster

    require_cluster()


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_detached_slurm_run_reaches_completed_through_wait(home, project):
    from slurm_support import sacct_settles

    r = run_mltrain("job=script", "job.script=show_env.py", *SLURM, "--detach", cwd=project, timeout=60)
    assert r.rc == 0, r.err
    run_id = only_run(home)["id"]
    run = mltrain.Run.get(run_id)
    assert run.wait(timeout=120) == "Completed"
    record = run.record
    assert sacct_settles(record["slurm"]["job_id"]) == "COMPLETED"
    from mltrain.runs.record import RunRecord

    order = ["NotStarted", "Preparing", "Queued", "Running", "Finalizing", "Completed"]
    assert RunRecord.load(run.run_dir).phase_order() == order, record["phases"]
    assert record["phases"]["Running"] > record["phases"]["Queued"]
    listed = run_mltrain("runs", "list", cwd=project)
    assert run_id in listed.out and "Completed" in listed.out


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_runs_list_is_current_for_detached_slurm_runs(home, project):
    r = run_mltrain("job=command", "job.command=true", *SLURM, "--detach", cwd=project, timeout=60)
    assert r.rc == 0, r.err
    run_id = only_run(home)["id"]
    looks = []  # when each look ended

    def look():
        out = run_mltrain("runs", "list", cwd=project).out
        looks.append(time.time())
        return out if "Completed" in out else None

    listed = until(look, 60, "runs list never showed Completed")
    line = next(l for l in listed.splitlines() if run_id in l)
    record = only_run(home)
    ended = max(record["phases"].values())
    # The end comes from the job's own account (its rank's report, written by the task on the node), not
    # from the look that saw it: the look may begin before the rank ends, so only its end bounds the time.
    from mltrain.ranks import reports

    rank_ended = reports.span(reports.read(record["dir"]))[1]
    assert rank_ended is not None and ended == rank_ended, (ended, rank_ended)
    assert ended < looks[-1], (ended, looks[-1])
    assert float(line.split()[-1].rstrip("s")) == round(ended - record["created"], 1), line


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_detached_slurm_run_cancelled_through_the_handle(home, project):
    from slurm_support import sacct

    r = run_mltrain("job=script", "job.script=sleeper.py", *SLURM, "--detach", cwd=project, timeout=60)
    assert r.rc == 0, r.err
    run = mltrain.Run.get(only_run(home)["id"])
    until(lambda: run.status == "Running", 60, "the Slurm job did not start")
    assert run.cancel() == "Canceled"
    job_id = run.record["slurm"]["job_id"]
    until(lambda: sacct(job_id) == "CANCELLED", 30, "sacct never said CANCELLED")
    assert run.status == "Canceled" and "scancel" in run.record["error"]


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_attached_slurm_run_cancelled_through_the_handle(home, project):
    from slurm_support import sacct

    driver = subprocess.Popen(mltrain_exe() + ["job=script", "job.script=sleeper.py", *SLURM], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        record = until(lambda: next(iter((home / "runs").glob("script_*/run.json")), None)
                        if (home / "runs").is_dir() else None, 60, "no run record")
        run_dir = record.parent
        run = mltrain.Run(run_dir)
        until(lambda: run.status == "Running", 60, "the Slurm job did not start")
        assert run.cancel() == "Canceled"
        out, err = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert driver.returncode == 130, out + err
    until(lambda: sacct(run.record["slurm"]["job_id"]) == "CANCELLED", 30, "sacct never said CANCELLED")
    assert run.status == "Canceled"


@pytest.mark.slow
@pytest.mark.usefixtures("cluster")
def test_a_slurm_run_of_the_old_layout_resumes_on_slurm(home, project):
    from slurm_support import sacct_settles

    run_dir = _install_old_run(home, "oldlayout_slurm", project)
    r = run_mltrain("runs", "resume", "oldlayout_slurm", cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    record = only_run(home)
    assert record["status"] == "Completed" and record["slurm"]["job_id"] != "2"
    assert sacct_settles(record["slurm"]["job_id"]) == "COMPLETED"
    assert "resumed: rank 0 of 2 ok" in (run_dir / "logs" / "rank_0.log").read_text()
