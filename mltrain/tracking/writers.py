"""Where the mirror (mltrain.tracking.mirroring) writes: MLflow's own tables in the embedded SQLite store,
directly, or MLflow's client for anything else.

The direct writer exists so that a run's mirror is finished before the command that ran it returns
(issue 39: "the command's end is the data's end"): importing MLflow and starting its engine takes 2.5 s
on an idle 2-core machine and up to 9 s under load, against a 0.6 s `mltrain job=command`; the rows
themselves take milliseconds. It writes the rows MLflow's SqlAlchemyStore writes for create_run,
log_batch, set_terminated and create_experiment (tests/test_tracking.py reads them back with MLflow's
client), one run in one `BEGIN IMMEDIATE` transaction, so a mirror killed at any instant leaves the store
as it was or with that run whole. It is taken only where that holds, as for the registry's direct path
(mltrain.models.sqlite_registry): an embedded store whose Alembic revision and columns were checked
(mltrain.tracking.store_schema), and
MLflow's workspaces off. Anything else goes through MLflow's client.
"""
from __future__ import annotations

import contextlib
import math
import posixpath
import sqlite3
import sys
import time
import uuid
from typing import Any, Dict, Iterator, Optional, Protocol, Sequence, Tuple

from mltrain.tracking import mlflow_store as store
from mltrain.tracking import store_schema

#: (key, value, timestamp in ms, step), as MLflow's Metric takes them.
MetricRow = Tuple[str, float, int, int]

#: MLflow 3.17's and 3.18's tracking tables as the direct writer uses them (revision: store_schema.KNOWN_REVISIONS).
COLUMNS = {
    "experiments": {"experiment_id", "name", "artifact_location", "lifecycle_stage", "creation_time",
                    "last_update_time", "workspace"},
    "experiment_tags": {"key", "value", "experiment_id"},
    "runs": {"run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id", "status",
             "start_time", "end_time", "source_version", "lifecycle_stage", "artifact_uri", "experiment_id",
             "deleted_time"},
    "tags": {"key", "value", "run_uuid"},
    "params": {"key", "value", "run_uuid"},
    "metrics": {"key", "value", "timestamp", "run_uuid", "step", "is_nan"},
    "latest_metrics": {"key", "value", "timestamp", "step", "is_nan", "run_uuid"},
}
_TAG_MAX, _PARAM_MAX = 8000, 6000
_BUSY_TIMEOUT_S = 120.0


class Writer(Protocol):
    """What the mirror asks of a store."""

    #: The errors with which the store refuses one run (said, and the other runs mirrored all the same).
    refusals: Tuple[type[Exception], ...]

    def transaction(self) -> contextlib.AbstractContextManager[None]: ...
    def find_experiment(self, name: str) -> Optional[str]: ...
    def experiment(self, name: str, tags: Dict[str, str]) -> str: ...
    def find_tagged(self, experiment: str, key: str, value: str) -> Optional[Tuple[str, str]]: ...
    def exists(self, run_id: str) -> bool: ...
    def create_run(self, experiment: str, name: str, start_ms: Optional[int], tags: Dict[str, str]) -> str: ...
    def log(self, run_id: str, metrics: Sequence[MetricRow] = (), params: Optional[Dict[str, str]] = None,
            tags: Optional[Dict[str, str]] = None) -> None: ...
    def terminate(self, run_id: str, status: str, end_ms: int) -> None: ...
    def artifact_uri(self, run_id: str) -> str: ...
    def log_artifact(self, run_id: str, path: str, artifact_path: str) -> None: ...


def open_writer() -> Writer:
    """The direct writer where the store allows it (made from the run template when new), else MLflow's."""
    direct = SqliteWriter.open()
    return direct if direct is not None else MlflowWriter(store.client())


class SqliteWriter:
    refusals: Tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con

    @classmethod
    def open(cls) -> Optional[SqliteWriter]:
        db = store.sqlite_path()
        if db is None or store_schema.workspaces_on() or not store.create_from_template():
            return None
        con = sqlite3.connect(str(db), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        if not store_schema.schema_known(con, {**store_schema.REGISTRY_COLUMNS, **COLUMNS}):
            con.close()
            return None
        return cls(con)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.con.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def find_experiment(self, name: str) -> Optional[str]:
        row = self.con.execute("SELECT experiment_id FROM experiments WHERE workspace = ? AND name = ?",
                               (store_schema.WORKSPACE, name)).fetchone()
        return str(row[0]) if row else None

    def experiment(self, name: str, tags: Dict[str, str]) -> str:
        found = self.find_experiment(name)
        if found is None:  # MLflow's create_experiment, with mltrain's artifact root as its location
            now = _now()
            cur = self.con.execute(
                "INSERT INTO experiments (name, artifact_location, lifecycle_stage, creation_time, "
                "last_update_time, workspace) VALUES (?, ?, 'active', ?, ?, ?)",
                (name, store.artifact_root(), now, now, store_schema.WORKSPACE))
            found = str(cur.lastrowid)
        self.con.executemany("INSERT OR IGNORE INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)",
                             [(k, v, int(found)) for k, v in tags.items()])
        return found

    def find_tagged(self, experiment: str, key: str, value: str) -> Optional[Tuple[str, str]]:
        # MLflow's search_runs: active runs only, newest start first
        row = self.con.execute(
            "SELECT r.run_uuid, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE "
            "r.experiment_id = ? AND r.lifecycle_stage = 'active' AND t.key = ? AND t.value = ? "
            "ORDER BY r.start_time DESC, r.run_uuid LIMIT 1", (int(experiment), key, value)).fetchone()
        return (row[0], row[1]) if row else None

    def exists(self, run_id: str) -> bool:
        return self.con.execute("SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)).fetchone() is not None

    def create_run(self, experiment: str, name: str, start_ms: Optional[int], tags: Dict[str, str]) -> str:
        (location,) = self.con.execute("SELECT artifact_location FROM experiments WHERE experiment_id = ?",
                                       (int(experiment),)).fetchone()
        run_id = uuid.uuid4().hex
        # MLflow's create_run: the client's user id ('unknown' without an mlflow.user tag), source UNKNOWN
        self.con.execute(
            "INSERT INTO runs (run_uuid, name, source_type, source_name, entry_point_name, user_id, status, "
            "start_time, end_time, source_version, lifecycle_stage, artifact_uri, experiment_id, deleted_time) "
            "VALUES (?, ?, 'UNKNOWN', '', '', ?, 'RUNNING', ?, NULL, '', 'active', ?, ?, NULL)",
            (run_id, name, tags.get("mlflow.user", "unknown"), start_ms if start_ms is not None else _now(),
             posixpath.join(str(location), run_id, "artifacts"), int(experiment)))
        self.log(run_id, tags={"mlflow.runName": name, **tags})
        return run_id

    def log(self, run_id: str, metrics: Sequence[MetricRow] = (), params: Optional[Dict[str, str]] = None,
            tags: Optional[Dict[str, str]] = None) -> None:
        # A param keeps its first value (MLflow refuses a change); a value logged again is the same row.
        self.con.executemany("INSERT OR IGNORE INTO params (key, value, run_uuid) VALUES (?, ?, ?)",
                             [(k, v[:_PARAM_MAX], run_id) for k, v in (params or {}).items()])
        self.con.executemany("INSERT OR REPLACE INTO tags (key, value, run_uuid) VALUES (?, ?, ?)",
                             [(k, v[:_TAG_MAX], run_id) for k, v in (tags or {}).items()])
        rows = [(key, *_sanitized(value), stamp, step) for key, value, stamp, step in metrics]
        # metric_pk is every column: a value mirrored again (a mirror killed before its mark) is the same row
        self.con.executemany("INSERT OR IGNORE INTO metrics (key, is_nan, value, timestamp, step, run_uuid) "
                             "VALUES (?, ?, ?, ?, ?, ?)", [(*r, run_id) for r in rows])
        latest: Dict[str, Tuple[int, int, float, int]] = {}
        for key, is_nan, value, stamp, step in rows:  # MLflow: newest by (step, timestamp, value)
            if key not in latest or (step, stamp, value) > latest[key][:3]:
                latest[key] = (step, stamp, value, is_nan)
        for key, (step, stamp, value, is_nan) in latest.items():
            old = self.con.execute("SELECT step, timestamp, value FROM latest_metrics WHERE run_uuid = ? AND key = ?",
                                   (run_id, key)).fetchone()
            if old is None or (step, stamp, value) > tuple(old):
                self.con.execute("INSERT OR REPLACE INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", (key, value, stamp, step, is_nan, run_id))

    def terminate(self, run_id: str, status: str, end_ms: int) -> None:
        self.con.execute("UPDATE runs SET status = ?, end_time = ? WHERE run_uuid = ?", (status, end_ms, run_id))

    def artifact_uri(self, run_id: str) -> str:
        return str(self.con.execute("SELECT artifact_uri FROM runs WHERE run_uuid = ?", (run_id,)).fetchone()[0])

    def log_artifact(self, run_id: str, path: str, artifact_path: str) -> None:
        raise AssertionError("the embedded store's artifacts are local files")  # _artifacts links them


class MlflowWriter:
    """The same through MLflow's client (a tracking server, another database, a schema not checked)."""

    def __init__(self, client: Any) -> None:
        from mlflow.exceptions import MlflowException  # heavy

        self.client = client
        self.refusals: Tuple[type[Exception], ...] = (MlflowException,)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        yield  # each call is MLflow's own transaction; the mirror's marks make a repeat harmless

    def find_experiment(self, name: str) -> Optional[str]:
        found = self.client.get_experiment_by_name(name)
        return str(found.experiment_id) if found else None

    def experiment(self, name: str, tags: Dict[str, str]) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is None:
            return str(self.client.create_experiment(name, artifact_location=store.artifact_root(), tags=tags))
        for key, value in tags.items():
            if key not in found.tags:  # made by an earlier mltrain
                self.client.set_experiment_tag(found.experiment_id, key, value)
        return str(found.experiment_id)

    def find_tagged(self, experiment: str, key: str, value: str) -> Optional[Tuple[str, str]]:
        hits = self.client.search_runs([experiment], f"tags.`{key}` = '{value}'", max_results=1)
        return (hits[0].info.run_id, hits[0].info.status) if hits else None

    def exists(self, run_id: str) -> bool:
        from mlflow.exceptions import MlflowException  # heavy

        try:
            self.client.get_run(run_id)
        except MlflowException:
            return False
        return True

    def create_run(self, experiment: str, name: str, start_ms: Optional[int], tags: Dict[str, str]) -> str:
        return str(self.client.create_run(experiment, start_time=start_ms, run_name=name, tags=tags).info.run_id)

    def log(self, run_id: str, metrics: Sequence[MetricRow] = (), params: Optional[Dict[str, str]] = None,
            tags: Optional[Dict[str, str]] = None) -> None:
        from mlflow.entities import Metric, Param, RunTag  # heavy

        items = [Param(k, v[:_PARAM_MAX]) for k, v in (params or {}).items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(run_id, params=items[i:i + 100])
        for i in range(0, len(metrics), 1000):
            self.client.log_batch(run_id, metrics=[Metric(*m) for m in list(metrics)[i:i + 1000]])
        if tags:
            self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])

    def terminate(self, run_id: str, status: str, end_ms: int) -> None:
        self.client.set_terminated(run_id, status, end_time=end_ms)

    def artifact_uri(self, run_id: str) -> str:
        return str(self.client.get_run(run_id).info.artifact_uri)

    def log_artifact(self, run_id: str, path: str, artifact_path: str) -> None:
        self.client.log_artifact(run_id, path, artifact_path=artifact_path)


def _sanitized(value: float) -> Tuple[int, float]:
    """(is_nan, value) as MLflow's SqlAlchemyStore.sanitize_metric_value stores them."""
    if math.isnan(value):
        return 1, 0.0
    if math.isinf(value):
        return 0, math.copysign(sys.float_info.max, value)
    return 0, value


def _now() -> int:
    return int(time.time() * 1000)

