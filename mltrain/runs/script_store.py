"""What a job's scripts logged with mlflow into a run's MLflow *file store*, read without MLflow.

A run's ranks log into the run's own SQLite database (mltrain.runs.mlflow_run). A job that brings an
MLflow version of its own (`pip install 'mlflow<2.19'` in an Azure command, mltrain.azureml.pip_layer)
cannot open that database: its schema is the one mltrain's MLflow made (an Alembic revision the older
version does not know), and the older version's SQL store may not even import against the SQLAlchemy
it finds. Such a job's processes log instead to a file store in the run folder, `<run>/mlruns`, under
the same run id (mltrain.runs.layer_site makes it). The file store is a folder of plain files whose
layout every MLflow client from 1.x to 3.x reads and writes alike, needs no schema migration and no
SQLAlchemy, and is read here with nothing but the file system; the mirror folds it into the run as it
folds the database (mltrain.tracking.mirroring), and a sweep follows its primary metric in it.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

#: The file store's folder in the run folder, and the experiment its one run is in (MLflow's default).
FILE_STORE = "mlruns"
EXPERIMENT = "0"

#: (key, value, timestamp in ms, step), as MLflow's metrics table holds them.
Row = Tuple[str, float, int, int]


def run_folder(run_dir: str | Path, run_id: str) -> Path:
    return Path(run_dir) / FILE_STORE / EXPERIMENT / run_id


def metric_rows(run_dir: str | Path, run_id: str, key: Optional[str] = None) -> List[Row]:
    """Every value logged, in the order each metric's file holds them; one metric when `key` is given.
    A metric file is `timestamp value step` lines, its name the key (a key with `/` is a subfolder); a
    line a rank is writing right now is skipped, and read the next time."""
    folder = run_folder(run_dir, run_id) / "metrics"
    if not folder.is_dir():
        return []
    files = [folder / key] if key is not None else sorted(p for p in folder.rglob("*") if p.is_file())
    out: List[Row] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        name = path.relative_to(folder).as_posix()
        for line in text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]:
            parts = line.split()
            try:
                out.append((name, float(parts[1]), int(parts[0]), int(parts[2]) if len(parts) > 2 else 0))
            except (IndexError, ValueError):
                continue
    return out


def params(run_dir: str | Path, run_id: str) -> List[Tuple[str, str]]:
    """(key, value) of the parameters logged: one file each, its content the value."""
    folder = run_folder(run_dir, run_id) / "params"
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            out.append((path.relative_to(folder).as_posix(), path.read_text(encoding="utf-8")))
        except OSError:
            continue
    return out
