"""Bad input, as a new user would give it: a non-zero exit, no traceback, one line naming the key or
file, no hang, and nothing left behind: no run or sweep folder for a refused command, no run left
in a non-final status once its folder exists."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import mltrain_exe, only_run, run_mltrain, runs

REFUSED = [
    (["experiment=nosuch"], "experiment: 'nosuch' is not a known experiment"),
    (["experiment=ddp_smok"], "experiment: 'ddp_smok' is not a known experiment (closest: ddp_smoke)"),
    (["+nonsense_key=1"], "nonsense_key: unknown key"),
    (["trainer.epochs=0"], "trainer.epochs: 0 is invalid; must be > 0"),
    (["data=image_directory"], "data.train_dir: a value is required (set data.train_dir=...)"),
    (["-m", "trainer.epochs=1,0"], "trainer.epochs: 0 is invalid"),
    (["distribution=pytorch", "distribution.horovod=true"], "distribution.horovod: true needs distribution=mpi"),
]


def _nothing_written(home) -> bool:
    return not (home / "runs").exists()


@pytest.mark.parametrize("args, expected", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_refused_before_anything_is_written(home, project, args, expected):
    r = run_mltrain(*args, cwd=project, timeout=60)
    assert r.rc == 2, r.out + r.err
    assert "Traceback" not in r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mltrain: error: {expected}"), r.err
    assert _nothing_written(home), "a refused command left a folder behind"


def test_a_dry_run_writes_nothing(home, project):
    r = run_mltrain("--dry-run", "-m", "job=command", "job.command=true", "+job.params.x=1,2", cwd=project)
    assert r.rc == 0 and "dry run" in r.out
    assert _nothing_written(home)


def test_a_reused_run_id_is_refused_and_the_first_run_kept(home, project):
    assert run_mltrain("job=command", "job.command=true", "run.id=mine", cwd=project).rc == 0
    r = run_mltrain("job=command", "job.command=false", "run.id=mine", cwd=project)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        f"mltrain: error: run.id: a run already exists at {home / 'runs' / 'mine'}; run directories are never reused"]
    assert only_run(home)["status"] == "Completed"


def test_an_invalid_ignore_pattern_fails_the_run_with_the_file_named(home, project):
    (project / ".amlignore").write_text("data\\raw\\\n")  # a Windows path, as users write them
    r = run_mltrain("job=script", "job.script=show_env.py", cwd=project)
    assert r.rc != 0 and "Traceback" not in r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and f"{project / '.amlignore'}: Invalid git pattern" in lines[0], r.err
    run = only_run(home)
    assert run["status"] == "Failed" and ".amlignore" in run["error"]


def test_a_sweep_whose_member_cannot_be_created_leaves_no_member_waiting(home, project):
    (project / "runs").mkdir()
    (project / "runs" / "taken_1").mkdir()  # member 1's directory exists already
    r = run_mltrain("-m", "job=command", "job.command=true", f"run.root={project}/runs", "run.id=taken",
                    "+job.params.x=1,2", cwd=project)
    assert r.rc == 2 and "run.id: a run already exists" in r.err and len(r.err.strip().splitlines()) == 1
    assert not (project / "runs" / "taken").exists() and not any((project / "runs").glob("*/run.json"))


def test_sbatch_failing_ends_the_run_failed(home, project, tmp_path):
    if not shutil.which("sbatch"):
        from slurm_support import require_cluster

        require_cluster()
    empty = tmp_path / "slurm.conf"
    empty.write_text("")
    r = run_mltrain("job=command", "job.command=true", "compute=slurm", cwd=project, env={"SLURM_CONF": str(empty)})
    assert r.rc == 1 and "Traceback" not in r.out + r.err
    run = only_run(home)
    assert run["status"] == "Failed" and run["error"].startswith("submission to Slurm failed: sbatch")


def test_a_truncated_run_record_is_reported_not_a_traceback(home, project):
    assert run_mltrain("job=command", "job.command=true", cwd=project).rc == 0
    run = only_run(home)
    path = home / "runs" / run["id"] / "run.json"
    path.write_text(path.read_text()[:40])
    for command in ("show", "status"):
        r = run_mltrain("runs", command, run["id"], cwd=project)
        assert r.rc != 0 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1
        assert "run.json is unreadable" in r.err
    listed = run_mltrain("runs", "list", cwd=project)
    assert listed.rc == 0 and f"{run['id']}" in listed.out and "unreadable" in listed.out


def test_runs_list_into_head_ends_quietly(home, project):
    assert run_mltrain("job=command", "job.command=true", cwd=project).rc == 0
    template = runs(home)[0]
    record = json.loads((home / "runs" / template["id"] / "run.json").read_text())
    for i in range(1500):  # more output than a pipe holds, so the writer sees the reader go
        folder = home / "runs" / f"copy_{i:04d}"
        folder.mkdir()
        (folder / "run.json").write_text(json.dumps({**record, "id": folder.name}))
    out = subprocess.run(" ".join(mltrain_exe()) + " runs list --limit 2000 | head -1", shell=True,
                         capture_output=True, text=True, cwd=project, env={**os.environ}, timeout=120)
    assert out.stdout.startswith("RUN") and "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr
