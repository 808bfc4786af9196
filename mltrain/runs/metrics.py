"""The run's metrics file: append-only JSON lines, safe when several ranks write at once.

Each record is one line written with a single write() on an O_APPEND descriptor under an exclusive
flock, so lines from different ranks never interleave.
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

#: The names mltrain's own system metrics are logged under (mltrain.ranks.system_metrics, MLflow's prefix).
SYSTEM_PREFIX = "system/"


def _clean(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/inf; keep them readable
    return value


class MetricsWriter:
    def __init__(self, path: str | Path, rank: Optional[int] = None) -> None:
        self.path = Path(path)
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank

    def log(self, name: str, value: object, step: Optional[int] = None, **extra: object) -> None:
        self.write({"name": name, "value": _clean(value), "step": step, **extra})

    def log_many(self, values: Mapping[str, object], step: Optional[int] = None, **extra: object) -> None:
        for name, value in values.items():
            self.log(name, value, step, **extra)

    def write(self, record: Dict[str, Any]) -> None:
        line = json.dumps({**record, "rank": self.rank, "time": time.time()}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def read_metrics(path: str | Path) -> List[Dict[str, Any]]:
    return list(iter_metrics(path))


def iter_metrics(path: str | Path) -> Iterator[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    yield json.loads(line)
    except FileNotFoundError:
        return


def summarize(records: List[Dict[str, Any]], name: Optional[str] = None) -> Dict[str, Any]:
    """{name: value} for metrics logged once, {name: [values]} for those logged several times: what the run's
    programs logged, as Azure's Run.get_metrics() gives it; mltrain's own system/ samples only when asked by name
    (`runs show`, `runs plot` and MLflow show them all)."""
    grouped: Dict[str, List[Any]] = {}
    for r in records:
        if r["name"] == name or (name is None and not str(r["name"]).startswith(SYSTEM_PREFIX)):
            grouped.setdefault(r["name"], []).append(r["value"])
    return {k: v[0] if len(v) == 1 else v for k, v in grouped.items()}


def last_and_best(records: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Per scalar metric: its last value, and its lowest and highest (which is best depends on the metric)."""
    out: Dict[str, Dict[str, Any]] = {}
    for r in records:
        value = r.get("value")
        if r.get("kind", "scalar") != "scalar" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        entry = out.setdefault(r["name"], {"last": value, "min": value, "max": value, "count": 0})
        entry.update(last=value, min=min(entry["min"], value), max=max(entry["max"], value), count=entry["count"] + 1)
    return out


def last_text(records: List[Dict[str, Any]]) -> Dict[str, str]:
    """Per text metric (a value that is a string, e.g. the trainer's `input_pipeline`): its last value."""
    return {str(r["name"]): r["value"] for r in records
            if isinstance(r.get("value"), str) and r.get("kind", "scalar") in ("scalar", "text")}


def read_new(path: str | Path, offset: int) -> Tuple[List[Dict[str, Any]], int]:
    """(records, new offset): the whole lines appended since `offset`, for following a run's metrics
    while it runs (a line still being written is left for the next look)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    records: List[Dict[str, Any]] = []
    for line in data[:end].splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except ValueError:  # a line damaged by a killed writer: skip it, keep following
                continue
    return records, offset + end
