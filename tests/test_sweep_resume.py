"""`mltrain runs resume SWEEP` with real processes: a seeded random sweep whose driver is killed with
SIGKILL (or canceled with Ctrl-C) while members run goes on to the same members and the same best as
the uninterrupted sweep; the members that had completed are kept, those the kill or the cancel
stopped run again in their own run folders."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from slurm_support import require_cluster
from support import SCRIPTS, mltrain_exe, pid_alive, run_mltrain, runs, slow_to_snapshot, until

pytestmark = pytest.mark.slow

TOTAL = 6


def sweep_args(pause: float) -> list:
    return ["-m", "job=script", "job.script=score_of.py", f"job.arguments=[--x,$AML_PARAMETER_x,--pause,{pause}]",
            "+job.params.x=interval(0,1)", "sweep.sampling=random", "sweep.seed=11", f"sweep.max_total_runs={TOTAL}",
            "sweep.max_concurrent_runs=2", "sweep.primary_metric=score", "run.console=none"]


def the_sweep(home: Path) -> Path:
    found = list((home / "runs" / "_sweeps").glob("*/sweep.json"))
    assert len(found) == 1, found
    return found[0].parent


def doc_of(sweep: Path) -> dict:
    return json.loads((sweep / "sweep.json").read_text())


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> dict:
    """The same sweep, never interrupted (fast: the curve does not depend on the pause)."""
    where = tmp_path_factory.mktemp("whole")
    shutil.copytree(SCRIPTS, where / "proj")
    r = run_mltrain(*sweep_args(0.02), cwd=where / "proj", env={"MLTRAIN_HOME": str(where / "home"),
                                                                "MLTRAIN_TRACKING": "off"})
    assert r.rc == 0, r.out + r.err
    return doc_of(the_sweep(where / "home"))


def start_and_stop(home: Path, project: Path, how: signal.Signals, args: list | None = None) -> tuple:
    """The slow sweep, stopped by `how` once 2 members completed and another runs; (completed run ids,
    ids of the runs that had not ended, the driver's exit status)."""
    driver = subprocess.Popen(mltrain_exe() + (args or sweep_args(0.5)), cwd=project, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "MLTRAIN_HOME": str(home)})

    def two_done_one_running():
        found = runs(home)
        status = [x["status"] for x in found]
        running = [x for x in found if x["status"] == "Running" and (args or x.get("ranks", {}).get("0", {}).get("pid"))]
        return found if status.count("Completed") >= 2 and len(running) >= 1 else None

    until(two_done_one_running, 60, "two members completed and one running")
    driver.send_signal(how)
    code = driver.wait(timeout=60)
    at_end = runs(home)  # what the driver left: only it writes a member's end into run.json
    completed = {x["id"] for x in at_end if x["status"] == "Completed"}
    stopped = {x["id"]: int(x["ranks"].get("0", {}).get("pid") or 0) for x in at_end if x["id"] not in completed}
    assert len(completed) >= 2 and stopped, at_end
    if args is None:  # local ranks end with their driver; a Slurm job runs on
        until(lambda: not any(pid_alive(p) for p in stopped.values() if p), 30, "rank processes left behind")
    return completed, set(stopped), code


def check_resumed(home: Path, whole: dict, completed: set, stopped: set, why: str) -> tuple:
    sweep = the_sweep(home)
    started = time.monotonic()
    resumed = run_mltrain("runs", "resume", str(sweep), cwd=sweep, timeout=120)  # from anywhere
    took = time.monotonic() - started
    assert resumed.rc == 0, resumed.out + resumed.err
    doc = doc_of(sweep)
    assert doc["status"] == "Completed" and len(doc["members"]) == TOTAL
    wrong = [(m["run_id"], m["status"], m["intervals"], m["error"]) for m in doc["members"]
             if m["status"] != "Completed" or m["intervals"] != 6]
    assert not wrong, f"{wrong}\n{resumed.out}"
    records = {x["id"]: x for x in runs(home)}
    ids = [m["run_id"] for m in doc["members"]]
    assert len(set(ids)) == TOTAL and set(records) == set(ids), "no extra run: reruns reuse their run folders"
    for run_id in completed:  # kept as they were: not run again
        assert run_id in ids and not records[run_id].get("attempts"), records[run_id]
    rerun = [i for i in ids if records[i].get("attempts")]
    assert set(rerun) == stopped, (rerun, stopped)
    for run_id in rerun:
        assert records[run_id]["status"] == "Completed"
        assert records[run_id]["attempts"][0]["error"].startswith(why)
    # the same members and the same best as the uninterrupted sweep with the same seed
    assert [m["params"] for m in doc["members"]] == [m["params"] for m in whole["members"]]
    assert doc["best_params"] == whole["best_params"] and doc["best_value"] == whole["best_value"]
    assert f"best: {doc['best_run_id']}" in resumed.out
    return len(rerun), took


def test_a_sweep_whose_driver_was_killed_resumes_to_the_uninterrupted_best(home, project, whole):
    completed, stopped, _ = start_and_stop(home, project, signal.SIGKILL)
    rerun, took = check_resumed(home, whole, completed, stopped, "driver lost")
    print(f"\nsweep resume after kill -9: {len(completed)} kept, {rerun} run again, "
          f"{TOTAL - len(completed) - rerun} new; best equal: yes; resume took {took:.1f}s")


def test_a_run_made_as_the_driver_died_before_sweep_json_listed_it_is_run_again_not_doubled(home, project, whole):
    """The driver makes a member's run, then lists it in sweep.json: a kill -9 between the two leaves a
    run and an Optuna trial that sweep.json does not name, and maybe a run whose snapshot is not copied
    yet. That state is made here from the last member after the kill: its row taken out of sweep.json,
    its snapshot removed (the window itself is a few milliseconds wide)."""
    completed, stopped, _ = start_and_stop(home, project, signal.SIGKILL)
    sweep = the_sweep(home)
    doc = doc_of(sweep)
    last = max(doc["members"], key=lambda m: m["index"])
    assert last["run_id"] in stopped, (last, stopped)
    (sweep / "sweep.json").write_text(json.dumps({**doc, "members": [m for m in doc["members"] if m is not last]}))
    # and the driver died before it had copied the run's snapshot
    run_dir = Path(last["run_dir"])
    shutil.rmtree(run_dir / "snapshot")
    record = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({k: v for k, v in record.items() if k != "snapshot"}))
    check_resumed(home, whole, completed, stopped, "driver lost")


def test_a_canceled_sweep_resumes_to_the_uninterrupted_best(home, project, whole):
    completed, stopped, code = start_and_stop(home, project, signal.SIGINT)
    assert code == 130 and doc_of(the_sweep(home))["status"] == "Canceled"
    rerun, _ = check_resumed(home, whole, completed, stopped, "the sweep was canceled")
    assert rerun == len(stopped)


FULL_ONCE = """\
import os, sys, time
from azureml.core import Run
x = int(sys.argv[1])
os.makedirs("outputs", exist_ok=True)
if x == 2 and not os.path.exists("outputs/tried"):  # its first attempt meets a full device (a real one: /dev/full)
    open("outputs/tried", "w").write("1")
    with open("/dev/full", "w") as f:
        f.write("checkpoint")
        f.flush()
if x == 1 and not os.path.exists("outputs/tried"):  # long enough for the driver to die under it
    open("outputs/tried", "w").write("1")
    time.sleep(60)
Run.get_context().log("score", x)
"""


def test_a_member_the_full_disk_failed_runs_again_on_resume(home, project):
    """A sweep stopped while a full device had failed one member (chaos seed 14: the disk filled, the driver could
    not write its journal, the command said to make room and resume): `runs resume SWEEP` runs that member again in
    its own folder, as it does a member its driver's death stopped; one that Failed by itself would stay Failed."""
    (project / "full_once.py").write_text(FULL_ONCE)
    proc = subprocess.Popen(mltrain_exe() + [
        "-m", "job=script", "job.script=full_once.py", "job.arguments=[$AML_PARAMETER_x]", "+job.params.x=choice(1,2)",
        "sweep.sampling=grid", "sweep.primary_metric=score", "sweep.max_concurrent_runs=2", "run.console=none"],
        cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        until(lambda: sorted(r["status"] for r in runs(home)) == ["Failed", "Running"], 120,
              "the full device to fail member x=2 while x=1 runs")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    failed = next(r for r in runs(home) if r["status"] == "Failed")
    assert "No space left on device" in failed["error"], failed["error"]
    again = run_mltrain("runs", "resume", str(the_sweep(home)), cwd=project, timeout=300)
    assert again.rc == 0, again.out + again.err
    members = doc_of(the_sweep(home))["members"]
    assert [m["status"] for m in members] == ["Completed", "Completed"], members
    assert len(runs(home)) == 2 and all(len(r.get("attempts") or []) == 1 for r in runs(home))  # in their folders
    assert doc_of(the_sweep(home))["best_value"] == 2


def test_a_completed_sweep_or_a_detached_resume_is_refused_in_one_line(home, project):
    r = run_mltrain(*[a.replace("max_total_runs=6", "max_total_runs=2") for a in sweep_args(0)], cwd=project)
    assert r.rc == 0, r.out + r.err
    sweep = the_sweep(home)
    again = run_mltrain("runs", "resume", sweep.name, cwd=project)
    assert again.rc == 2 and again.out == "", again.out + again.err
    assert again.err.strip() == (f"mltrain: error: sweep {sweep.name} is Completed: nothing to resume "
                                 f"(`mltrain runs best {sweep.name}` shows it)")
    detached = run_mltrain("runs", "resume", str(sweep), "--detach", cwd=project)
    assert detached.rc == 2 and len(detached.err.strip().splitlines()) == 1 and "cannot be detached" in detached.err
    # a sweep folder without its Optuna journal cannot go on
    doc = doc_of(sweep)
    (sweep / "sweep.json").write_text(json.dumps({**doc, "status": "Running"}))
    (sweep / "optuna.journal").unlink()
    broken = run_mltrain("runs", "resume", str(sweep), cwd=project)
    assert broken.rc == 2 and broken.err.strip().splitlines() == [
        f"mltrain: error: sweep {sweep.name} cannot be resumed: optuna.journal missing from {sweep}"], broken.err
    assert len(runs(home)) == 2, "nothing was started"
    nowhere = run_mltrain("runs", "resume", str(home / "no-such-sweep"), cwd=project)
    assert nowhere.rc == 2 and nowhere.err.strip() == f"mltrain: error: no run '{home / 'no-such-sweep'}' under " \
                                                      f"{home / 'runs'} (see `mltrain runs list`)", nowhere.err


def test_members_still_running_on_slurm_are_followed_again(home, project, whole):
    require_cluster()
    args = [a.replace(f"max_total_runs={TOTAL}", "max_total_runs=4") for a in sweep_args(1.0)]
    check_followed_on_slurm(home, project, whole, args + ["compute=slurm", "compute.poll_s=0.3"])


def check_followed_on_slurm(home: Path, project: Path, whole: dict, args: list) -> dict:
    """The driver killed with members on Slurm, then resumed: every member Slurm had is followed (or
    settled), never run again; a member the driver had made and not yet submitted when it died (its
    record has no Slurm part) runs again; the sweep ends as the uninterrupted one. The records, by id."""
    completed, stopped, _ = start_and_stop(home, project, signal.SIGKILL, args)
    unsubmitted = {x["id"] for x in runs(home) if x["id"] in stopped and not x.get("slurm")}
    running = stopped - unsubmitted
    sweep = the_sweep(home)
    resumed = run_mltrain("runs", "resume", sweep.name, cwd=project, timeout=180)
    assert resumed.rc == 0, resumed.out + resumed.err
    # a job may end on its own between the kill and the resume's look (a loaded machine): then it is settled
    # (and one may still be queued: Slurm starts jobs on its own schedule). A member whose run.json said
    # Completed when the driver was killed, before the driver had written that into sweep.json, is settled too.
    doc = doc_of(sweep)
    run_of = {m["index"]: m["run_id"] for m in doc["members"]}
    # a packed member the driver had queued and no worker had taken yet is queued again (it never ran)
    looked = {run_of[int(i)] for i in re.findall(r"\[#(\d+)\] \S+(?:: followed again| while the sweep's driver was "
                                                  r"away: settled|: queued again \(nothing had started it\))",
                                                  resumed.out)}
    again = {run_of[int(i)] for i in re.findall(r"\[#(\d+)\] run again \(driver lost", resumed.out)}
    assert running <= looked and looked - running <= completed and again == unsubmitted, resumed.out
    records = {x["id"]: x for x in runs(home)}
    assert doc["status"] == "Completed" and [m["params"] for m in doc["members"]] == \
        [m["params"] for m in whole["members"][:4]]
    assert all(m["status"] == "Completed" == records[m["run_id"]]["status"] and m["intervals"] == 6
               for m in doc["members"]), doc["members"]
    ran_twice = {i for i, r in records.items() if r.get("attempts")}
    assert ran_twice == unsubmitted, "a Slurm job that ran on is not run again"
    return records


def test_packed_members_still_running_on_slurm_are_followed_again(home, project, whole):
    """The same with the members packed into 2 Slurm worker jobs (issue 36): the workers outlive the
    killed driver and run on; the resume follows the members they run through their records, runs the
    sweep's remaining members packed again, and runs nothing twice."""
    require_cluster()
    args = [a.replace(f"max_total_runs={TOTAL}", "max_total_runs=4") for a in sweep_args(1.0)]
    records = check_followed_on_slurm(home, project, whole,
                                      args + ["compute=slurm", "compute.poll_s=0.3", "compute.pack=2"])
    assert all("pack" in r["slurm"] for r in records.values())  # every member ran packed


def squeue_ids(name: str) -> set:
    out = subprocess.run(["squeue", "-h", "-o", "%i", "-n", name], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def packed(name: str, args: list) -> list:
    """`args` as a sweep on Slurm whose members are packed one per worker job named `{name}-pack`."""
    return args + ["compute=slurm", "compute.poll_s=0.3", "compute.pack=1", f"experiment_name={name}"]


def killed_once(home: Path, project: Path, args: list, ready) -> object:
    """The sweep's driver started, SIGKILLed once `ready()` returned what it waited for (returned here)."""
    driver = subprocess.Popen(mltrain_exe() + args, cwd=project, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "MLTRAIN_HOME": str(home)})
    try:
        return ready()
    finally:
        driver.kill()
        driver.wait(timeout=30)


def two_queued_worker_held(home: Path, name: str):
    """Waits for 2 members Queued for a worker Slurm holds (`hold=true`); returns that worker's job ids."""
    def ready() -> set:
        until(lambda: len(runs(home)) == 2 and all(r["status"] == "Queued" for r in runs(home)), 60, "2 members queued")
        return until(lambda: squeue_ids(f"{name}-pack"), 30, "the held worker")
    return ready


def resume_started(home: Path, project: Path, sweep: Path, stdout=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(mltrain_exe() + ["runs", "resume", sweep.name], cwd=project, stdout=stdout,
                            stderr=subprocess.PIPE if stdout == subprocess.PIPE else subprocess.STDOUT, text=True,
                            env={**os.environ, "MLTRAIN_HOME": str(home)})


def resume_with_its_own_worker(resume: subprocess.Popen, name: str, first: set) -> str:
    """The resume submits a worker of its own (held too): released, the resume ends; its output."""
    try:
        again = until(lambda: squeue_ids(f"{name}-pack") - first, 60, "a worker submitted by the resume")
        subprocess.run(["scontrol", "release", *again], check=True)
        out, err = resume.communicate(timeout=120)
    finally:
        resume.kill()
        subprocess.run(["scancel", "-n", f"{name}-pack"], check=False)
    assert resume.returncode == 0, out + err
    assert sorted(re.findall(r"\[#(\d+)\] Queued: queued again \(nothing had started it\)", out)) == ["0", "1"], out
    return out


def test_a_packed_member_whose_worker_never_came_is_queued_again(home, project, whole):
    """The driver died with its members queued for a packed worker that never started (held by Slurm here,
    then canceled): no worker will take them, so the resume takes them out of the queue, submits a worker of
    its own and runs each of them once. Before, the resume followed them and waited forever."""
    require_cluster()
    name = f"held{os.getpid()}"
    args = packed(name, [a.replace(f"max_total_runs={TOTAL}", "max_total_runs=2") for a in sweep_args(0.0)]
                  + ["+compute.additional_parameters.hold=true"])
    first = killed_once(home, project, args, two_queued_worker_held(home, name))
    subprocess.run(["scancel", *first], check=True)  # the worker the dead driver submitted never comes
    sweep = the_sweep(home)
    out = resume_with_its_own_worker(resume_started(home, project, sweep), name, first)
    doc = doc_of(sweep)
    assert doc["status"] == "Completed" and [m["params"] for m in doc["members"]] == \
        [m["params"] for m in whole["members"][:2]], out
    records = runs(home)
    assert [r["status"] for r in records] == ["Completed"] * 2 and not any(r.get("attempts") for r in records), records


MARKED = """\
import os, sys
from pathlib import Path
from mltrain import run

with open(Path(sys.argv[1]) / os.environ["MLTRAIN_RUN_ID"], "a") as marks:
    marks.write("ran\\n")
run.log("score", float(os.environ["AML_PARAMETER_x"]), step=1)
"""


def marked_sweep(project: Path, name: str) -> tuple:
    """Two members of MARKED, packed, their worker held by Slurm; (args, the folder of their marks)."""
    (project / "marked.py").write_text(MARKED)
    marks = project / "marks"
    marks.mkdir()
    args = ["-m", "job=script", "job.script=marked.py", f"job.arguments=[{marks}]", "+job.params.x=interval(0,1)",
            "sweep.sampling=random", "sweep.seed=11", "sweep.max_total_runs=2", "sweep.max_concurrent_runs=2",
            "sweep.primary_metric=score", "run.console=none", "+compute.additional_parameters.hold=true"]
    return packed(name, args), marks


def each_ran_once(home: Path, marks: Path) -> None:
    records = runs(home)
    assert [r["status"] for r in records] == ["Completed"] * 2 and not any(r.get("attempts") for r in records), records
    assert {p.name: p.read_text() for p in marks.iterdir()} == {r["id"]: "ran\n" for r in records}


def test_a_packed_member_recorded_queued_but_never_queued_runs_once_on_resume(home, project):
    """Issue 63: the driver records a packed member Queued, then puts it in its queue. Killed between the two (as
    its workers ran out of work and left), it left a member no worker will ever take: the resume followed it as
    Queued, for ever. Here the state is made as that kill leaves it (the entry taken out of the queue, the workers
    gone): the resume queues that member again too, keeps a worker for it, and each member runs once."""
    require_cluster()
    name = f"unqueued{os.getpid()}"
    args, marks = marked_sweep(project, name)
    first = killed_once(home, project, args, two_queued_worker_held(home, name))
    subprocess.run(["scancel", *first], check=True)  # the queue's workers have left
    (late,) = [r for r in runs(home) if r["sweep"]["index"] == 1]
    part = late["slurm"]
    (Path(part["pack"]) / "todo" / part["entry"]).unlink()  # the driver died before queuing it
    sweep = the_sweep(home)
    out = resume_with_its_own_worker(resume_started(home, project, sweep), name, first)
    assert doc_of(sweep)["status"] == "Completed", out
    each_ran_once(home, marks)


GATED = """\
import os, sys, time
from pathlib import Path
from mltrain import run

gate = Path(sys.argv[1])
while not (gate / "go").exists():
    time.sleep(0.1)
with open(gate / os.environ["MLTRAIN_RUN_ID"], "a") as marks:
    marks.write("ran\\n")
run.log("score", float(os.environ["AML_PARAMETER_x"]), step=1)
"""


def test_a_resumed_packed_sweep_keeps_a_worker_for_a_member_put_back_in_its_queue(home, project, tmp_path):
    """Issue 63: a resume follows the packed member a worker runs for the dead driver; when that worker is stopped
    under it (scancel here; a node drained), the member goes back to the queue, and only a worker takes it from
    there. The resume keeps the queue's workers as the driver did: it submits one, and the member runs once to
    its end. Before, the resume followed it as Queued, for ever."""
    require_cluster()
    name = f"putback{os.getpid()}"
    (project / "gated.py").write_text(GATED)
    gate = project / "gate"
    gate.mkdir()
    args = packed(name, ["-m", "job=script", "job.script=gated.py", f"job.arguments=[{gate}]",
                         "+job.params.x=interval(0,1)", "sweep.sampling=random", "sweep.seed=11",
                         "sweep.max_total_runs=1", "sweep.primary_metric=score", "run.console=none"])

    def running() -> set:
        until(lambda: [r["status"] for r in runs(home)] == ["Running"], 60, "the member running in its worker")
        return squeue_ids(f"{name}-pack")

    (worker,) = killed_once(home, project, args, running)
    said = tmp_path / "resume.out"
    with open(said, "w") as out:
        resume = resume_started(home, project, the_sweep(home), stdout=out)
    try:
        until(lambda: "[#0] Running: followed again" in said.read_text(), 60, "the resume following the member")
        subprocess.run(["scancel", worker], check=True)  # its worker stopped under it: back in the queue
        until(lambda: worker not in squeue_ids(f"{name}-pack"), 60, "the stopped worker gone")
        (gate / "go").touch()
        resume.wait(timeout=90)
    finally:
        resume.kill()
        subprocess.run(["scancel", "-n", f"{name}-pack"], check=False)
    text = said.read_text()
    assert resume.returncode == 0, text
    (record,) = runs(home)
    assert record["status"] == "Completed" and len(record.get("attempts") or []) == 1, (record, text)  # stopped once
    assert {p.name: p.read_text() for p in gate.iterdir() if p.name != "go"} == {record["id"]: "ran\n"}


def test_a_resumed_packed_sweep_counts_the_workers_slurm_still_holds_for_it(home, project, tmp_path):
    """Issue 63: the dead driver's worker is still queued in Slurm (held here), not started: the resume counts it
    (squeue: PENDING) and submits none of its own; once Slurm starts it, it runs the members queued again."""
    require_cluster()
    name = f"pending{os.getpid()}"
    args, marks = marked_sweep(project, name)
    first = killed_once(home, project, args, two_queued_worker_held(home, name))
    said = tmp_path / "resume.out"
    with open(said, "w") as out:
        resume = resume_started(home, project, the_sweep(home), stdout=out)
    try:
        until(lambda: said.read_text().count("queued again (nothing had started it)") == 2, 60, "both queued again")
        time.sleep(2)  # the resume tends its pool at once, and then every 0.1 s
        assert squeue_ids(f"{name}-pack") == first, "a worker submitted beside the one Slurm holds for the queue"
        subprocess.run(["scontrol", "release", *first], check=True)
        resume.wait(timeout=90)
    finally:
        resume.kill()
        subprocess.run(["scancel", "-n", f"{name}-pack"], check=False)
    text = said.read_text()
    assert resume.returncode == 0, text
    each_ran_once(home, marks)


def test_a_sweep_whose_driver_was_killed_making_its_first_members_run_is_resumed_with_that_run(home, project):
    """The driver makes its first member's run (record, then a snapshot of the project) before that member is in
    sweep.json; killed there, it left a run no sweep listed and no sweep.json, so `runs resume` had no sweep to take
    up (the campaign's seed 140, third pass). sweep.json now exists before any member's run, and the resume adopts
    the run the driver made: one run per member, none orphaned."""
    slow_to_snapshot(project)  # the window in which to kill the driver
    driver = subprocess.Popen(mltrain_exe() + sweep_args(0.02), cwd=project, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, env={**os.environ, "MLTRAIN_HOME": str(home)})
    try:
        until(lambda: list((home / "runs").glob("*/run.json")), 120, "the first member's run to be made",
              every_s=0.005)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    sweep = the_sweep(home)
    assert not doc_of(sweep)["members"], "killed after the first member was listed: nothing unlisted to test"
    (made,) = [p.parent.name for p in (home / "runs").glob("*/run.json")]
    r = run_mltrain("runs", "resume", str(sweep), cwd=project, timeout=240)
    assert r.rc == 0, r.out + r.err
    assert "Traceback" not in r.err
    doc = doc_of(sweep)
    assert doc["status"] == "Completed" and len(doc["members"]) == TOTAL, doc
    listed = {m["run_id"] for m in doc["members"]}
    assert made in listed, (made, listed)
    assert listed == {p.parent.name for p in (home / "runs").glob("*/run.json")}, "a run no sweep lists"
