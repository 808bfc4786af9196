"""The tracking layer's own rules, without MLflow: what the ranks are told, which logged values the
mirror copies, and how what scripts logged through mlflow is folded into metrics.jsonl (on an MLflow
run database reduced to the two tables it reads)."""
import json
import sqlite3

from mltrain.runs import mlflow_run
from mltrain.runs.metrics import read_metrics
from mltrain.runs.record import RunRecord
from mltrain.tracking import mirroring as tracking

from .jobs import frozen_job


def test_the_ranks_are_told_a_fixed_run_in_their_own_database(monkeypatch):
    monkeypatch.setenv("MLTRAIN_TRACKING", "on")
    env = mlflow_run.rank_env("/runs/r1")
    if mlflow_run.enabled():
        assert env == {"MLFLOW_TRACKING_URI": "sqlite:////runs/r1/mlflow.db", "MLFLOW_RUN_ID": mlflow_run.RUN_ID}
    monkeypatch.setenv("MLTRAIN_TRACKING", "off")
    assert mlflow_run.rank_env("/runs/r1") == {}


def test_seeding_is_skipped_for_a_run_whose_ranks_were_not_told(tmp_path):
    mlflow_run.seed_run_db(tmp_path, {})
    assert not (tmp_path / mlflow_run.RUN_DB).exists()


def test_the_mirror_copies_rank_0s_scalars_once(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"name": "loss", "value": 0.5, "step": 1, "rank": 0, "time": 10.0},
            {"name": "loss", "value": 0.7, "step": 1, "rank": 1, "time": 10.0},
            {"name": "flag", "value": True, "rank": 0},
            {"name": "table", "value": [1, 2], "kind": "list", "rank": 0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    metrics, done = tracking._new_metrics(path, 0)
    assert metrics == [("loss", 0.5, 10000, 1)] and done == 4
    assert tracking._new_metrics(path, done) == ([], 4)


def test_what_scripts_logged_through_mlflow_is_folded_in_once(tmp_path):
    record = RunRecord.create(frozen_job(run_dir=str(tmp_path / "r1"), run_id="r1"))
    con = sqlite3.connect(record.dir / mlflow_run.RUN_DB)
    con.execute("CREATE TABLE metrics (key TEXT, value REAL, timestamp INTEGER, step INTEGER)")
    con.execute("CREATE TABLE params (key TEXT, value TEXT)")
    con.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)", [("acc", 0.5, 1000, 0), ("acc", 0.75, 2000, 1)])
    con.execute("INSERT INTO params VALUES ('lr', '0.1')")
    con.commit()
    con.close()
    done = tracking._fold_script_metrics(record, 0)
    assert done == 2 and record.doc.script_params == {"lr": "0.1"}
    folded = [r for r in read_metrics(record.dir / "metrics.jsonl") if r.get("source") == "mlflow"]
    assert [(r["name"], r["value"], r["step"]) for r in folded] == [("acc", 0.5, 0), ("acc", 0.75, 1)]
    assert tracking._fold_script_metrics(record, done) == 2  # nothing new: nothing appended again
    assert len([r for r in read_metrics(record.dir / "metrics.jsonl") if r.get("source") == "mlflow"]) == 2
