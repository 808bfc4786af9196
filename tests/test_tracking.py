"""Runs mirrored into the MLflow store (issue 12, part 2): MLflow's own client reads them back, and a
script logging through `mlflow` under 2 ranks lands in its run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_mltrain, runs

pytestmark = pytest.mark.tracking


def mirrored(run_dir: Path) -> dict:
    """run.json, which must say the mirror has copied the run as it ended: the command that saw the
    run end mirrored it before it returned (issue 39)."""
    data = json.loads((run_dir / "run.json").read_text())
    assert (data.get("mlflow") or {}).get("status") == data["status"], f"{run_dir.name} was not mirrored"
    return data


def client(home: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_an_mlflow_script_under_two_ranks_lands_in_its_run(home, project, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a machine's very first run
    dry = run_mltrain("job=script", "job.script=mlflow_v2.py", "--dry-run", cwd=project)
    # a dry run prepares no MLflow database (what it keeps in the cache folder is its composition, for the next
    # command: mltrain.config.compose_cache)
    assert dry.rc == 0 and not list((tmp_path / "cache").glob("mltrain/mlflow-*"))
    assert [p.name for p in (tmp_path / "cache" / "mltrain").iterdir()] == ["compose"]
    r = run_mltrain("job=script", "job.script=mlflow_v2.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "run.id=v2", cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    assert "preparing MLflow's database" in r.out
    data = mirrored(home / "runs" / "v2")
    rows = [json.loads(x) for x in (home / "runs" / "v2" / "metrics.jsonl").read_text().splitlines()]
    assert [x["value"] for x in rows if x["name"] == "loss"] == [1.0, 0.5, 1.0 / 3]
    logged = {x["name"] for x in rows if not x["name"].startswith("system/")}  # beside mltrain's own samples
    assert logged == {"loss", "done_rank_0", "done_rank_1"}  # both ranks, one run
    assert data["script_params"] == {"learning_rate": "0.01"}
    run = client(home).get_run(data["mlflow"]["run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["mltrain.run_id"] == "v2"
    assert run.data.params["learning_rate"] == "0.01" and run.data.params["job.script"] == "mlflow_v2.py"
    history = client(home).get_metric_history(run.info.run_id, "loss")
    assert [(m.step, m.value) for m in history] == [(0, 1.0), (1, 0.5), (2, 1.0 / 3)]
    shown = run_mltrain("runs", "show", "v2", cwd=project).out
    assert "loss:" in shown  # mltrain's own commands read metrics.jsonl, which now holds them


def test_what_a_script_logs_as_an_artifact_is_its_runs_own(home, project, tmp_path, monkeypatch):
    # The database every run copies is made once per machine; its artifact locations were those of the folder
    # it was made in: every later run's mlflow.log_artifact landed in that one folder (another project's)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    elsewhere = tmp_path / "made-here"
    elsewhere.mkdir()
    (elsewhere / "first.py").write_text("print('first')\n")
    assert run_mltrain("job=script", "job.script=first.py", "run.id=first", cwd=elsewhere).rc == 0
    (project / "art.py").write_text("import os, mlflow\nmlflow.log_text(os.environ['MLTRAIN_RUN_ID'], 'm/who.txt')\n")
    for run_id in ("a1", "a2"):
        r = run_mltrain("job=script", "job.script=art.py", f"run.id={run_id}", cwd=project)
        assert r.rc == 0, r.out + r.err
    for run_id in ("a1", "a2"):
        assert (home / "runs" / run_id / "artifacts" / "m" / "who.txt").read_text() == run_id
        data = mirrored(home / "runs" / run_id)
        mirrored_file = Path(client(home).get_run(data["mlflow"]["run_id"]).info.artifact_uri.replace("file://", ""))
        assert (mirrored_file / "m" / "who.txt").read_text() == run_id  # what `mltrain ui` shows
    assert not list(elsewhere.rglob("who.txt"))


def test_the_mirror_writes_back_its_mark_only_never_a_status_the_run_has_moved_on_from(home, project):
    """The mirror runs in a process of its own, from run.json as it read it, for seconds (MLflow's import
    alone). Once it wrote that copy back whole: a detached Slurm run mirrored while Queued, then seen to
    end by `runs wait`, read Queued again. Here the run moves on while a mirror holds an older copy:
    `runs resume` starts a second attempt, and the mirror's write keeps it."""
    from mltrain.jobspec.status import RUNNING
    from mltrain.runs.record import RunRecord

    r = run_mltrain("job=script", "job.script=mlflow_v2.py", "run.id=m", cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    run_dir = home / "runs" / "m"
    data = mirrored(run_dir)
    held = RunRecord.load(run_dir)  # what a mirror read
    moved = RunRecord.load(run_dir)
    moved.reopen()
    moved.set_status(RUNNING)
    held.update_on_disk(mlflow=held.doc.mlflow, script_params=dict(held.doc.script_params))
    now = json.loads((run_dir / "run.json").read_text())
    assert now["status"] == RUNNING and len(now["attempts"]) == 1, now
    assert now["mlflow"]["run_id"] == data["mlflow"]["run_id"] and now["script_params"] == {"learning_rate": "0.01"}


def test_sweep_members_are_children_of_one_mlflow_run(home, project):
    r = run_mltrain("-m", "job=script", "job.script=rerun_me.py", "+job.params.x=1,2", cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    members = [mirrored(Path(m["dir"])) for m in runs(home)]
    c = client(home)
    found = [c.get_run(m["mlflow"]["run_id"]) for m in members]
    parents = {f.data.tags.get("mlflow.parentRunId") for f in found}
    assert len(found) == 2 and len(parents) == 1 and None not in parents
    parent = c.get_run(parents.pop())
    assert "mltrain.group" in parent.data.tags
    assert sorted(f.data.params["job.params.x"] for f in found) == ["1", "2"]
    assert all(len(c.get_metric_history(f.info.run_id, "value")) == 3 for f in found)


@pytest.mark.slow
def test_a_detached_slurm_run_is_mirrored_by_the_look_that_sees_it_end(home, project):
    from slurm_support import require_cluster

    require_cluster()
    r = run_mltrain("job=script", "job.script=mlflow_v2.py", "compute=slurm", "compute.poll_s=0.3",
                    "run.id=away", "--detach", cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    assert run_mltrain("runs", "wait", "away", cwd=project, timeout=180).rc == 0  # no sync asked for
    data = mirrored(home / "runs" / "away")
    run = client(home).get_run(data["mlflow"]["run_id"])
    assert run.info.status == "FINISHED" and run.data.params["learning_rate"] == "0.01"
    history = client(home).get_metric_history(run.info.run_id, "loss")
    assert [m.value for m in history] == [1.0, 0.5, 1.0 / 3]
