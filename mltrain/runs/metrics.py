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


def attempt_here(run_dir: Path) -> List[int]:
    """[resumes, requeues]: which attempt of the run in `run_dir` this process belongs to. `runs resume` records
    each earlier attempt in run.json (`attempts`); Slurm counts a job's requeues (SLURM_RESTART_COUNT)."""
    try:
        resumes = len(json.loads((run_dir / "run.json").read_text()).get("attempts") or [])
    except (OSError, ValueError, AttributeError):
        resumes = 0
    return [resumes, int(os.environ.get("SLURM_RESTART_COUNT") or 0)]


class MetricsWriter:
    def __init__(self, path: str | Path, rank: Optional[int] = None) -> None:
        self.path = Path(path)
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        # Lines of a later attempt carry it, so that its values replace an earlier attempt's (latest_attempts).
        attempt = attempt_here(self.path.parent)
        self.attempt: Optional[List[int]] = attempt if any(attempt) else None

    def log(self, name: str, value: object, step: Optional[int] = None, **extra: object) -> None:
        self.write({"name": name, "value": _clean(value), "step": step, **extra})

    def log_many(self, values: Mapping[str, object], step: Optional[int] = None, **extra: object) -> None:
        for name, value in values.items():
            self.log(name, value, step, **extra)

    def write(self, record: Dict[str, Any]) -> None:
        stamped = {**record, "rank": self.rank, "time": time.time()}
        if self.attempt is not None:
            stamped["attempt"] = self.attempt
        line = json.dumps(stamped) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)


def read_metrics(path: str | Path) -> List[Dict[str, Any]]:
    return latest_attempts(list(iter_metrics(path)))


def _attempt_of(record: Mapping[str, Any]) -> Tuple[int, ...]:
    return tuple(record.get("attempt") or (0, 0))


def latest_attempts(records: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """A run started again in its folder (`runs resume`, a Slurm requeue) logs again the steps its earlier attempt
    had logged, unless it goes on from a checkpoint: for each metric, rank and step, the values of the latest
    attempt that logged it replace the earlier attempts' (steps only an earlier attempt reached are kept)."""
    if not any("attempt" in r for r in records):
        return records
    newest: Dict[Tuple[Any, Any, Any], Tuple[int, ...]] = {}
    for r in records:
        key = (r.get("name"), r.get("rank"), r.get("step"))
        newest[key] = max(newest.get(key, ()), _attempt_of(r))
    return [r for r in records if _attempt_of(r) == newest[(r.get("name"), r.get("rank"), r.get("step"))]]


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
