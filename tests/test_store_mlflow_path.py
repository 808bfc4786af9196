"""A store the direct writers were not checked against (a later MLflow's schema) goes through MLflow's client
(mltrain.tracking.store_schema): slower, and it must still finish. Until 2026-12-07 no test took that path:
CI installed MLflow 3.18, whose schema revision was not yet listed, and `mltrain ui` (its `runs sync`)
hung for good. `close_sweeps` took the store's file lock, then made MLflow's client, which takes the same
lock on a second descriptor: a process waiting on itself. Real commands, the real SQLite store, read back
with MLflow's client."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support import run_mltrain, runs

pytestmark = pytest.mark.tracking

CURVE = ["job=script", "job.script=curve.py", "job.arguments=[--pause,0]"]


def unknown_to_the_direct_writers(home: Path) -> None:
    """One column more in `runs` than the direct writer checked: it steps aside, as for a later MLflow's
    store; MLflow's own store ignores a column it does not map."""
    con = sqlite3.connect(str(home / "mlflow.db"))
    with con:
        con.execute("ALTER TABLE runs ADD COLUMN added_by_a_later_mlflow TEXT")
    con.close()


def test_runs_sweeps_models_and_sync_finish_on_a_store_only_mlflow_writes(home, project):
    assert run_mltrain(*CURVE, "run.id=first", cwd=project, timeout=120).rc == 0  # makes the store
    unknown_to_the_direct_writers(home)
    sweep = run_mltrain("-m", *CURVE, "+job.params.x=1,2", cwd=project, timeout=240)
    assert sweep.rc == 0, sweep.out + sweep.err
    (project / "model").mkdir()
    (project / "model" / "weights.pt").write_bytes(b"w")
    reg = run_mltrain("models", "register", "m", "--path", str(project / "model"), cwd=project, timeout=120)
    assert reg.rc == 0, reg.out + reg.err
    # everything is mirrored already: the sync only closes sweeps (where it waited on its own lock)
    synced = run_mltrain("runs", "sync", cwd=project, timeout=120)
    assert synced.rc == 0 and "Traceback" not in synced.err, synced.out + synced.err
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    c = MlflowClient(tracking_uri=uri, registry_uri=uri)
    made = runs(home)
    assert len(made) == 3 and all(r["status"] == "Completed" for r in made)
    for r in made:
        run = c.get_run(r["mlflow"]["run_id"])
        assert run.info.status == "FINISHED" and run.data.metrics["score"] is not None
    parents = c.search_runs([e.experiment_id for e in c.search_experiments()], "tags.`mltrain.group` != ''")
    assert [p.info.status for p in parents] == ["FINISHED"], "the sweep's parent run was not ended"
    assert [int(v.version) for v in c.search_model_versions("name = 'm'")] == [1]
