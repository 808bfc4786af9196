"""Runs as MLflow sees them: every run mirrored into the MLflow store that also holds the model
registry (mltrain.models.mlflow_store), so `mlflow ui --backend-store-uri <that store>` shows runs, sweeps and
pipelines (as parent and child runs) and their curves. metrics.jsonl stays the source of truth; the
mirror is a copy, made after the command that ran the runs has returned, in a background process
(mltrain.runs.mlflow_run.mirror_later starts this module as a program), so no `mltrain` command waits
for MLflow (or imports it). `mltrain runs sync` catches up runs whose end no command saw; a detached
Slurm run is mirrored by the first look (`runs status`, `wait`, ...) that sees it end. What the ranks
logged with mlflow into their run's own database (mltrain.runs.mlflow_run) is folded in here.
"""
from __future__ import annotations

import json
import logging
import sqlite3
import sys
import time
from pathlib import Path
from typing import Iterable, List, Optional

import yaml

from mltrain.models import mlflow_store as store
from mltrain.pipelines.reuse import flatten
from mltrain.runs.metrics import MetricsWriter
from mltrain.runs.mlflow_run import RUN_DB, ensure_template
from mltrain.runs.record import RunRecord
from mltrain.spec.records import MlflowMark

STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Canceled": "KILLED"}


def mirror(run_dirs: Iterable[str]) -> List[str]:
    """Mirror runs into the store; returns the MLflow run ids."""
    client = store.client()
    ensure_template()
    out = []
    with store.locked():
        for run_dir in run_dirs:
            try:
                record = RunRecord.load(run_dir)
            except Exception:
                continue
            out.append(_mirror_one(client, record))
    return out


def _experiment(client, name: str) -> str:
    found = client.get_experiment_by_name(name)
    return found.experiment_id if found else client.create_experiment(name)


def _parent(client, experiment: str, key: str, name: str) -> str:
    """The MLflow run standing for a sweep or pipeline (its members are its children)."""
    hits = client.search_runs([experiment], f"tags.`mltrain.group` = '{key}'", max_results=1)
    if hits:
        return hits[0].info.run_id
    return client.create_run(experiment, run_name=name, tags={"mltrain.group": key}).info.run_id


def _mirror_one(client, record) -> str:
    from mlflow.entities import Metric, Param, RunTag  # heavy

    d = record.doc
    mark = d.mlflow
    experiment = _experiment(client, d.experiment or "mltrain")
    if mark is None:
        tags = {"mltrain.run_id": record.id, "mltrain.run_dir": str(record.dir)}
        group = d.sweep.dir or (d.pipeline_step or {}).get("pipeline_run")
        if d.pipeline is not None:  # the parent its steps name: found, or made now
            run_id = _parent(client, experiment, record.id, record.id)
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        else:
            if group:
                tags["mlflow.parentRunId"] = _parent(client, experiment, group, Path(group).name)
            run_id = client.create_run(experiment, start_time=int(record.created * 1000), run_name=record.id,
                                       tags=tags).info.run_id
        params = {"overrides": " ".join(d.overrides)[:6000]}
        config = record.dir / "config.yaml"
        if config.is_file():
            for key, value in flatten(yaml.safe_load(config.read_text()) or {}).items():
                params[key[:250]] = json.dumps(value) if not isinstance(value, str) else value[:6000]
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            client.log_batch(run_id, params=items[i:i + 100])
        mark = MlflowMark(run_id=run_id)
    run_id = mark.run_id
    mark.folded = _fold_script_metrics(record, mark.folded)
    if d.script_params:  # logged again with the same value each time: MLflow accepts that
        client.log_batch(run_id, params=[Param(k[:250], str(v)[:6000]) for k, v in d.script_params.items()])
    metrics, mark.lines = _new_metrics(record.dir / "metrics.jsonl", mark.lines)
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=[Metric(*m) for m in metrics[i:i + 1000]])
    client.log_batch(run_id, tags=[RunTag("mltrain.status", d.status)])
    mark.status = d.status
    if d.status in STATUS:
        client.set_terminated(run_id, STATUS[d.status], end_time=int(d.ended_at * 1000))
    record.update(mlflow=mark)
    return run_id


def _new_metrics(path: Path, done: int):
    """(key, value, timestamp ms, step) of the scalar values past the first `done` lines, rank 0's."""
    out, n = [], 0
    if not path.is_file():
        return out, done
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if n <= done or not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            v = r.get("value")
            if r.get("kind", "scalar") != "scalar" or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if int(r.get("rank") or 0) == 0:
                out.append((str(r["name"]), float(v), int(float(r.get("time") or time.time()) * 1000),
                            int(r.get("step") or 0)))
    return out, max(n, done)


def _fold_script_metrics(record, done: int) -> int:
    """What the job's scripts logged through mlflow, appended to metrics.jsonl once (marked source
    mlflow); returns how many values have been folded so far."""
    db = record.dir / RUN_DB
    if not db.is_file():
        return done
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT key, value, timestamp, step FROM metrics ORDER BY timestamp, step, key").fetchall()
        params = con.execute("SELECT key, value FROM params").fetchall()
    finally:
        con.close()
    if len(rows) <= done and not params:
        return done
    writer = MetricsWriter(record.dir / "metrics.jsonl", rank=0)
    for key, value, stamp, step in rows[done:]:
        writer.write({"name": key, "value": value, "step": step, "kind": "scalar", "source": "mlflow",
                      "logged": stamp / 1000.0})
    for key, value in params:
        record.doc.script_params[key] = value
    return len(rows)


def main(argv: Optional[List[str]] = None) -> int:
    logging.disable(logging.CRITICAL)
    mirror(argv if argv is not None else sys.argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
