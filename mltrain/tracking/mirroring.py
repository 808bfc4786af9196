"""Runs as MLflow sees them: every run mirrored into the MLflow store that also holds the model
registry (mltrain.tracking.mlflow_store), so `mlflow ui --backend-store-uri <that store>` shows runs, sweeps and
pipelines (as parent and child runs) and their curves. metrics.jsonl stays the source of truth; the
mirror is a copy, made when a run ends, before the command that ran it returns (mltrain.runs.mlflow_run.
mirror_now starts `python -m mltrain.tracking.mirroring` and waits for it). On the embedded store it writes MLflow's
tables directly (mltrain.tracking.writers), one run per transaction, so a mirror killed at any instant
leaves the store whole; a mirror that did not finish is finished by the next command that looks at runs,
models or the UI (mltrain.runs.mlflow_run.catch_up), and `mltrain runs sync` catches up whatever else.
What the ranks logged with mlflow into their run's own database (mltrain.runs.mlflow_run) is folded in here.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple
from urllib.parse import urlparse

from mltrain.base.errors import one_line
from mltrain.jobspec.records import MlflowMark
from mltrain.pipelines.reuse import flatten
from mltrain.runs import script_store
from mltrain.runs.metrics import MetricsWriter
from mltrain.runs.mlflow_run import RUN_DB, RUN_ID, artifact_folders, ensure_template
from mltrain.runs.record import RunRecord
from mltrain.sweeps.results import SWEEP_FILE
from mltrain.tracking import mlflow_store as store
from mltrain.tracking.writers import MetricRow, Writer, open_writer

STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Canceled": "KILLED"}


#: The largest file of a run's logs/ and outputs/ that becomes an artifact of its MLflow run (a linked,
#: copied or uploaded file, see _artifacts); a checkpoint or model above it stays in the run folder.
ARTIFACT_LIMIT = 50 * 1024 * 1024


def mirror(run_dirs: Iterable[str]) -> List[str]:
    """Mirror runs into the store; returns the MLflow run ids. The sweeps they belong to are closed
    when the last of their members has ended. Each run is one transaction of the store; its mark in
    run.json is written after it, so a mirror killed between the two redoes that run (the same rows)."""
    records = []
    for run_dir in run_dirs:
        try:
            records.append(RunRecord.load(run_dir))
        except Exception:
            continue
    if not records:
        return []
    ensure_template()
    out, groups = [], {}
    writer = open_writer()  # before the lock: a new store is made under it
    with store.locked():
        for record in records:
            try:
                with writer.transaction():
                    run_id, mark = _mirror_one(writer, record)
            except writer.refusals as exc:  # one run the store refuses does not keep the others out
                print(f"mltrain: warning: {record.id} was not mirrored: {one_line(exc)}", file=sys.stderr)
                continue
            record.update_on_disk(mlflow=mark, script_params=dict(record.doc.script_params))
            out.append(run_id)
            if record.doc.sweep.dir:
                groups[record.doc.sweep.dir] = record.doc.experiment or "mltrain"
        _close_groups(writer, groups)
    return out


def close_sweeps(records: Iterable[RunRecord]) -> int:
    """End the parent runs of these runs' sweeps that are over but still RUNNING in MLflow (a sweep
    whose members were mirrored before its summary was written, or by an older mltrain); returns how many."""
    groups = {r.doc.sweep.dir: r.doc.experiment or "mltrain" for r in records if r.doc.sweep.dir}
    if not groups:
        return 0
    writer = open_writer()  # before the lock, as mirror() does: MLflow's client is made under it
    with store.locked():
        return _close_groups(writer, groups)


#: MLflow's UI opens an experiment of this kind on its runs (the "Model training" view); one it guesses
#: to be GenAI work opens on traces, which mltrain's runs have none of.
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"


def _experiment(writer: Writer, name: str) -> str:
    return writer.experiment(name, {KIND_TAG: KIND})


def _parent(writer: Writer, experiment: str, key: str, name: str, start: Optional[float] = None) -> str:
    """The MLflow run standing for a sweep or pipeline (its members are its children)."""
    found = writer.find_tagged(experiment, "mltrain.group", key)
    if found is not None:
        return found[0]
    return writer.create_run(experiment, name, int(start * 1000) if start else None, {"mltrain.group": key})


def mlflow_run_id(record: RunRecord) -> str:
    """The MLflow run standing for this mltrain run, made now if the mirror has not made it yet (a model
    registered from inside a running job names its run: MLflow links a model version to a run only
    when the version is created). The caller holds store.locked(); the record is not written here (the
    run's driver owns run.json while it runs): the mirror finds this run later by its tag."""
    if record.doc.mlflow is not None:
        return record.doc.mlflow.run_id
    writer = open_writer()
    with writer.transaction():
        return _run_for(writer, record, _experiment(writer, record.doc.experiment or "mltrain"))


def _run_for(writer: Writer, record: RunRecord, experiment: str) -> str:
    """Find the MLflow run of this mltrain run (tag mltrain.run_id), or make it: its name, tags, parent and
    the parameters (the overrides and the flattened resolved config, where the job's `params` are)."""
    d = record.doc
    if d.pipeline is None:
        hit = writer.find_tagged(experiment, "mltrain.run_id", record.id)
        if hit:
            return hit[0]
    resolved = record.resolved_config()
    step = d.pipeline_step or {}
    # What Azure ML's studio shows beside a run, as tags: the job's kind, where it ran, its folder.
    tags = {"mltrain.run_id": record.id, "mltrain.run_dir": str(record.dir), "mltrain.backend": d.backend,
            "mltrain.compute": d.compute, "mltrain.kind": str((resolved.get("job") or {}).get("kind") or "-")}
    if step.get("step"):
        tags["mltrain.step"] = str(step["step"])
    group = d.sweep.dir or step.get("pipeline_run")
    if d.pipeline is not None:  # the parent its steps name: found, or made now
        run_id = _parent(writer, experiment, record.id, f"pipeline {d.pipeline.name}", record.created)
        tags["mltrain.kind"] = "pipeline"
        writer.log(run_id, tags=tags)
    else:
        if group:
            name = f"sweep {Path(group).name}" if d.sweep.dir else f"pipeline {step.get('pipeline') or group}"
            tags["mlflow.parentRunId"] = _parent(writer, experiment, group, name, record.created)
        run_id = writer.create_run(experiment, str(step.get("step") or record.id), int(record.created * 1000), tags)
    params = {"overrides": " ".join(d.overrides)[:6000]}
    for key, value in (flatten(resolved) if resolved else {}).items():
        params[_key(key)] = json.dumps(value) if not isinstance(value, str) else value[:6000]
    writer.log(run_id, params={k: str(v) for k, v in params.items()})
    return run_id


def _mirror_one(writer: Writer, record: RunRecord) -> Tuple[str, MlflowMark]:
    """Copy what is new of the run; returns its MLflow run and the mark to keep in run.json."""
    d = record.doc
    mark = d.mlflow
    seen_end = mark is not None and mark.status in STATUS
    if mark is not None and not writer.exists(mark.run_id):  # a store made anew since: mirrored again whole
        mark, seen_end = None, False
    if mark is None:
        mark = MlflowMark(run_id=_run_for(writer, record, _experiment(writer, d.experiment or "mltrain")))
    else:
        mark = MlflowMark(**vars(mark))
    run_id = mark.run_id
    mark.folded = _fold_script_metrics(record, mark.folded)
    metrics, mark.lines = _new_metrics(record.dir / "metrics.jsonl", mark.lines)
    # logged again with the same value each time: the store keeps one row
    writer.log(run_id, metrics=metrics, params={_key(k): str(v)[:6000] for k, v in d.script_params.items()},
               tags={"mltrain.status": d.status})
    if d.pipeline is None:
        _artifacts(writer, record, run_id, upload=d.status in STATUS and not seen_end)
    mark.status = d.status
    if d.status in STATUS:
        writer.terminate(run_id, STATUS[d.status], int(d.ended_at * 1000))
    return run_id, mark


def _artifacts(writer: Writer, record: RunRecord, run_id: str, upload: bool) -> None:
    """The run's logs/ (rank 0's, the other ranks' and the launcher's), outputs/ and its scripts' own MLflow
    artifacts as the MLflow run's artifacts, each file up to ARTIFACT_LIMIT; larger ones stay only in the run folder (tag mltrain.run_dir).
    On an artifact store on this machine a file is a hard link: nothing is copied, and a log that grows
    while the run goes on grows there too. Symbolic links would not do: MLflow's server refuses to list
    a path that leads out of the run's artifact folder. On another filesystem it is copied; to a
    server's store it is uploaded once, when the run has ended."""
    uri = urlparse(writer.artifact_uri(run_id))
    local = uri.scheme in ("", "file")
    if not local and not upload:
        return
    # logs/ and outputs/ under their names; what the scripts logged to MLflow (log_artifact, log_model) as
    # they logged it
    folders = [(record.dir / "logs", record.dir), (record.dir / "outputs", record.dir),
               *((f, f) for f in artifact_folders(record.dir))]
    for folder, base in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if not path.is_file() or path.stat().st_size > ARTIFACT_LIMIT:
                continue
            where = path.relative_to(base)
            if not local:
                writer.log_artifact(run_id, str(path), where.parent.as_posix())
                continue
            target = Path(uri.path) / where
            if target.exists() and (os.path.samefile(target, path) or target.stat().st_size == path.stat().st_size):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            try:
                os.link(path, target)
            except OSError:  # another filesystem, or one without hard links
                shutil.copyfile(path, target)


def _close_groups(writer: Writer, groups: Dict[str, str]) -> int:
    closed = 0
    for group, experiment_name in groups.items():
        experiment = writer.find_experiment(experiment_name)
        parent = writer.find_tagged(experiment, "mltrain.group", group) if experiment is not None else None
        if parent is not None and parent[1] == "RUNNING":
            with writer.transaction():
                closed += _close_group(writer, parent[0], Path(group))
    return closed


def _close_group(writer: Writer, run_id: str, folder: Path) -> bool:
    """A sweep's parent run ends as the sweep did. A HyperDrive sweep's sweep.json says when and how, and
    its best member's value and parameters go on the parent (Azure's best child run); a plain grid ends
    when every member listed in summary.json has: Failed if one failed, else Canceled if one was."""
    hyper = _read_json(folder / SWEEP_FILE)
    if isinstance(hyper, dict):
        if not hyper.get("ended"):
            return False
        status, ended = str(hyper.get("status") or "Completed"), float(hyper["ended"])
        metric, best = hyper.get("primary_metric"), hyper.get("best_value")
        params = {"sampling": str(hyper.get("sampling")), "primary_metric": str(metric), "goal": str(hyper.get("goal"))}
        params.update({"space." + _key(k): str(v)[:6000] for k, v in (hyper.get("space") or {}).items()})
        params.update({"best." + _key(k): str(v)[:6000] for k, v in (hyper.get("best_params") or {}).items()})
        tags = {"mltrain.kind": "sweep", "mltrain.status": status}
        if hyper.get("best_run_id"):
            tags["mltrain.best_run_id"] = str(hyper["best_run_id"])
        metrics: List[MetricRow] = [(f"best_{metric}", float(best), int(ended * 1000), 0)] \
            if metric and isinstance(best, (int, float)) else []
        writer.log(run_id, metrics=metrics, params=params, tags=tags)
    else:
        rows = _read_json(folder / "summary.json")
        if not isinstance(rows, list) or not rows:
            return False
        # a deferred member canceled before its worker made it (`runs cancel SWEEP`), or never queued because no
        # worker reached Slurm, has no run folder: its summary row says how it ended
        never_made = [r for r in rows if r.get("status") in ("Canceled", "Failed")
                      and not (Path(r["run_dir"]) / "run.json").exists()]
        try:
            members = [RunRecord.load(r["run_dir"]).doc for r in rows if r not in never_made]
        except Exception:
            return False
        if any(m.status not in STATUS for m in members):
            return False
        found = {m.status for m in members} | {str(r["status"]) for r in never_made}
        status = "Failed" if "Failed" in found else "Canceled" if "Canceled" in found else "Completed"
        ended = max([m.ended_at for m in members] or [folder.stat().st_mtime])
        writer.log(run_id, tags={"mltrain.kind": "sweep", "mltrain.status": status})
    writer.terminate(run_id, STATUS[status], int(ended * 1000))
    return True


def _key(name: str) -> str:
    """A parameter name MLflow accepts (letters, digits, `_-. :/`, at most 250 characters): a Hydra
    override's `+`/`++`/`~` prefix is dropped, anything else unusual becomes `_`."""
    return re.sub(r"[^\w\-. :/]", "_", name.lstrip("+~"))[:250] or "_"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _new_metrics(path: Path, done: int) -> Tuple[List[MetricRow], int]:
    """(key, value, timestamp ms, step) of the scalar values past the first `done` lines, rank 0's."""
    out: List[MetricRow] = []
    n = 0
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


def _fold_script_metrics(record: RunRecord, done: int) -> int:
    """What the job's scripts logged through mlflow, appended to metrics.jsonl once (marked source
    mlflow); returns how many values have been folded so far. A job with an MLflow of its own logged to
    the run's file store instead (mltrain.runs.script_store): its values are folded in the same order."""
    rows: List[MetricRow] = script_store.metric_rows(record.dir, RUN_ID)
    params = script_store.params(record.dir, RUN_ID)
    db = record.dir / RUN_DB
    if db.is_file():
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            rows += con.execute("SELECT key, value, timestamp, step FROM metrics").fetchall()
            params += con.execute("SELECT key, value FROM params").fetchall()
        finally:
            con.close()
    rows.sort(key=lambda r: (r[2], r[3], r[0]))  # timestamp, step, key: the order folded so far
    if len(rows) <= done and not params:
        return done
    # What an earlier mirror appended but did not live to mark is not appended twice.
    done = max(done, _folded_before(record.dir / "metrics.jsonl"))
    writer = MetricsWriter(record.dir / "metrics.jsonl", rank=0)
    for key, value, stamp, step in rows[done:]:
        writer.write({"name": key, "value": value, "step": step, "kind": "scalar", "source": "mlflow",
                      "logged": stamp / 1000.0})
    for name, text in params:
        record.doc.script_params[name] = text
    return len(rows)


def _folded_before(path: Path) -> int:
    """How many values metrics.jsonl already holds from the scripts' mlflow (a torn last line is skipped)."""
    count = 0
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            for line in f:
                if '"mlflow"' in line:
                    try:
                        count += json.loads(line).get("source") == "mlflow"
                    except ValueError:
                        continue
    return count


def main(argv: Optional[List[str]] = None) -> int:
    """`--stdin`: the run folders come one a line, ended by an empty line (mltrain.runs.mlflow_run.Mirror);
    an input that ends before that line is a command that died or had nothing to mirror."""
    logging.disable(logging.CRITICAL)
    args = argv if argv is not None else sys.argv[1:]
    if args == ["--stdin"]:
        args = []
        for line in sys.stdin:
            if not line.strip():
                break
            args.append(line.rstrip("\n"))
        else:
            return 0
    mirror(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
