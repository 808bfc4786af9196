"""Runs as MLflow sees them: every run mirrored into the MLflow store that also holds the model
registry (mltrain.models.store), so `mlflow ui --backend-store-uri <that store>` shows runs, sweeps and
pipelines (as parent and child runs) and their curves. metrics.jsonl stays the source of truth; the
mirror is a copy, made after the command that ran the runs has returned, in a background process, so
no `mltrain` command waits for MLflow (or imports it). `mltrain runs sync` catches up runs whose end
no command saw; a detached Slurm run is mirrored by the first look (`runs status`, `wait`, ...) that
sees it end.

Scripts written for Azure ML v2 log with `mlflow.log_metric`/`log_param`. Each run gets its own small
MLflow database (a copy of a template whose schema and one run already exist), and its ranks get
MLFLOW_TRACKING_URI and MLFLOW_RUN_ID pointing at that run: several ranks write to one run, no rank
migrates a schema, and the mirror folds what they logged into the run's metrics.jsonl and its MLflow run.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional

SWITCH = "MLTRAIN_TRACKING"           # off: no mirror, no per-run database
RUN_DB = "mlflow.db"
STATUS = {"Completed": "FINISHED", "Failed": "FAILED", "Canceled": "KILLED"}


# ---------------------------------------------------------------------------------------- cheap side
def enabled() -> bool:
    """Whether runs are mirrored: MLflow is installed (looked up, not imported) and not switched off."""
    import importlib.util

    return os.environ.get(SWITCH, "on").lower() not in ("off", "0", "false") and \
        importlib.util.find_spec("mlflow") is not None


@functools.cache  # asked once per member of a sweep; reading package metadata is not free
def _template_dir() -> Path:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("mlflow-skinny")
    except PackageNotFoundError:
        ver = version("mlflow")
    cache = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser()
    return cache / "mltrain" / f"mlflow-{ver}"


def rank_env(run_dir: str, prepare: bool = True) -> Dict[str, str]:
    """MLflow variables for a run's ranks. The template they need is made once per machine (and MLflow
    version), here when it is missing and `prepare` (a dry run does not), so a machine's very first
    run already catches what its scripts log."""
    if not enabled():
        return {}
    meta = _template_dir() / "template.json"
    if not meta.is_file() and not (prepare and _prepare_template()):
        return {}
    run_id = json.loads(meta.read_text())["run_id"]
    return {"MLFLOW_TRACKING_URI": f"sqlite:///{Path(run_dir) / RUN_DB}", "MLFLOW_RUN_ID": run_id}


def _prepare_template() -> bool:
    """Make the template in a child process (this one never imports MLflow); one status line, and a
    warning rather than a failed run if MLflow cannot make it."""
    from mltrain.runs.console import Console

    console = Console()
    console.status("tracking: preparing MLflow's database for scripts that log with mlflow "
                   "(once per machine and MLflow version)")
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "mltrain.tracking", "--template"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 or not (_template_dir() / "template.json").is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        console.status(f"warning: tracking: MLflow could not make its database ({last}); scripts' mlflow "
                       "logging is not captured in this run")
        return False
    console.status(f"tracking: ready in {time.monotonic() - started:.1f}s")
    return True


def seed_run_db(run_dir: Path, env: Dict[str, str]) -> None:
    """Copy the template database into a new run whose ranks were given MLflow's variables."""
    if "MLFLOW_RUN_ID" in env:
        shutil.copyfile(_template_dir() / "template.db", run_dir / RUN_DB)


def mirror_later(run_dirs: Iterable[str]) -> None:
    """Mirror these runs in a background process that outlives this command."""
    dirs = [str(d) for d in run_dirs]
    if not dirs or not enabled():
        return
    subprocess.Popen([sys.executable, "-m", "mltrain.tracking", *dirs], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


# ---------------------------------------------------------------------------------------- MLflow side
def ensure_template() -> None:
    """A database with MLflow's schema and one run, copied into each new run (see rank_env). Built in a
    folder of its own and renamed into place whole, so processes racing to make it agree on one."""
    folder = _template_dir()
    if (folder / "template.json").is_file():
        return
    from mlflow import MlflowClient

    building = folder.with_name(f".{folder.name}-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    building.mkdir(parents=True)
    try:
        run = MlflowClient(tracking_uri=f"sqlite:///{building / 'template.db'}").create_run(
            "0", run_name="mltrain-run")
        import sqlite3

        # Copied into every run: MLflow's schema on 4 KB pages is 930 KB, on 1 KB pages about a quarter.
        con = sqlite3.connect(building / "template.db")
        try:
            con.execute("PRAGMA page_size=1024")
            con.execute("VACUUM")
        finally:
            con.close()
        (building / "template.json").write_text(json.dumps({"run_id": run.info.run_id}))
        if folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        os.rename(building, folder)
    except OSError:  # another process put its template there first: use that one
        if not (folder / "template.json").is_file():
            raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def mirror(run_dirs: Iterable[str]) -> List[str]:
    """Mirror runs into the store; returns the MLflow run ids."""
    from mltrain.models import store
    from mltrain.runs.record import RunRecord

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
    from mlflow.entities import Metric, Param, RunTag

    from mltrain.pipelines.reuse import flatten

    d = record.data
    mark = d.get("mlflow") or {}
    experiment = _experiment(client, d.get("experiment") or "mltrain")
    run_id = mark.get("run_id")
    if run_id is None:
        tags = {"mltrain.run_id": record.id, "mltrain.run_dir": str(record.dir)}
        group = (d.get("sweep") or {}).get("dir") or (d.get("pipeline_step") or {}).get("pipeline_run")
        if d.get("pipeline"):  # the parent its steps name: found, or made now
            run_id = _parent(client, experiment, record.id, record.id)
            client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])
        else:
            if group:
                tags["mlflow.parentRunId"] = _parent(client, experiment, group, Path(group).name)
            run_id = client.create_run(experiment, start_time=int(record.created * 1000), run_name=record.id,
                                       tags=tags).info.run_id
        params = {"overrides": " ".join(d.get("overrides") or [])[:6000]}
        config = record.dir / "config.yaml"
        if config.is_file():
            import yaml

            for key, value in flatten(yaml.safe_load(config.read_text()) or {}).items():
                params[key[:250]] = json.dumps(value) if not isinstance(value, str) else value[:6000]
        items = [Param(k, str(v)[:6000]) for k, v in params.items()]
        for i in range(0, len(items), 100):
            client.log_batch(run_id, params=items[i:i + 100])
        mark = {"run_id": run_id, "lines": 0, "folded": 0}
    mark["folded"] = _fold_script_metrics(record, mark.get("folded", 0))
    script_params = d.get("script_params") or {}
    if script_params:  # logged again with the same value each time: MLflow accepts that
        client.log_batch(run_id, params=[Param(k[:250], str(v)[:6000]) for k, v in script_params.items()])
    metrics, mark["lines"] = _new_metrics(record.dir / "metrics.jsonl", mark.get("lines", 0))
    for i in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=[Metric(*m) for m in metrics[i:i + 1000]])
    client.log_batch(run_id, tags=[RunTag("mltrain.status", d["status"])])
    mark["status"] = d["status"]
    if d["status"] in STATUS:
        client.set_terminated(run_id, STATUS[d["status"]], end_time=int(max(d["phases"].values()) * 1000))
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
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT key, value, timestamp, step FROM metrics ORDER BY timestamp, step, key").fetchall()
        params = con.execute("SELECT key, value FROM params").fetchall()
    finally:
        con.close()
    if len(rows) <= done and not params:
        return done
    from mltrain.runs.metrics import MetricsWriter

    writer = MetricsWriter(record.dir / "metrics.jsonl", rank=0)
    for key, value, stamp, step in rows[done:]:
        writer.write({"name": key, "value": value, "step": step, "kind": "scalar", "source": "mlflow",
                      "logged": stamp / 1000.0})
    for key, value in params:
        record.data.setdefault("script_params", {})[key] = value
    return len(rows)


def main(argv: Optional[List[str]] = None) -> int:
    import logging

    logging.disable(logging.CRITICAL)
    args = argv if argv is not None else sys.argv[1:]
    if args == ["--template"]:
        ensure_template()
    else:
        mirror(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
