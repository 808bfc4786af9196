"""Metrics from inside a job: `from mltrain import run; run.log("loss", 0.3, step=1)` (`mltrain.run` is
this module; the name says what it holds, the short name is what scripts import).

Inside an mltrain run (MLTRAIN_RUN_DIR is set in every rank) values are appended to the run's
metrics.jsonl with the rank and the time; several ranks may log at once. Outside one, they are
printed, so a script runs the same with plain `python`.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from mltrain.runs.metrics import MetricsWriter, read_metrics, summarize

_writer: Optional[MetricsWriter] = None


def _metrics_path() -> Optional[str]:
    run_dir = os.environ.get("MLTRAIN_RUN_DIR")
    return os.path.join(run_dir, "metrics.jsonl") if run_dir else None


def _get_writer() -> Optional[MetricsWriter]:
    global _writer
    path = _metrics_path()
    if path is None:
        return None
    if _writer is None or str(_writer.path) != path:
        _writer = MetricsWriter(path)
    return _writer


def _emit(record: Dict[str, Any]) -> None:
    writer = _get_writer()
    if writer is None:
        print(f"[metric] {record}", flush=True)
    else:
        writer.write(record)


def log(name: str, value: Any, step: Optional[int] = None, description: str = "") -> None:
    """One value of a metric (Azure: run.log)."""
    _emit({"name": name, "value": value, "step": step, "kind": "scalar", **({"description": description} if description else {})})


def log_list(name: str, values: List[Any], description: str = "") -> None:
    """A list of values, stored as one record (Azure: run.log_list)."""
    _emit({"name": name, "value": list(values), "step": None, "kind": "list", **({"description": description} if description else {})})


def log_row(name: str, description: str = "", **columns: Any) -> None:
    """One row of a table metric (Azure: run.log_row)."""
    _emit({"name": name, "value": columns, "step": None, "kind": "row", **({"description": description} if description else {})})


def log_table(name: str, value: Dict[str, List[Any]], description: str = "") -> None:
    """A whole table as {column: [values]} (Azure: run.log_table)."""
    _emit({"name": name, "value": value, "step": None, "kind": "table", **({"description": description} if description else {})})


def get_metrics(name: Optional[str] = None) -> Dict[str, Any]:
    """{name: value} for metrics logged once, {name: [values]} for those logged several times."""
    path = _metrics_path()
    if path is None:
        return {}
    return summarize(read_metrics(path), name)


def heartbeat() -> None:
    """Say this rank is making progress, for a run watched for hangs (run.hang_timeout_min) whose script may be
    silent for a long time: no output, no metric. A no-op outside an mltrain run."""
    run_dir = os.environ.get("MLTRAIN_RUN_DIR")
    if not run_dir:
        return
    folder = os.path.join(run_dir, "heartbeat")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"rank_{os.environ.get('RANK', '0')}"), "w") as f:
        f.write(str(os.getpid()))
