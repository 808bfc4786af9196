"""The run handle: one run, whatever ran it, attached or detached.

`status`, `wait()`, `cancel()`, `metrics()` and `logs()` mean the same for every backend: each look
asks the run's backend (named in its record) to bring the record up to date first, so a detached
Slurm run is as current as one whose driver is watching. Used by `mltrain runs ...`, the Python API
and everything that follows runs (sweeps, pipelines).
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from mltrain import backends
from mltrain.backends.base import driver_alive
from mltrain.base.errors import MltrainError, RunCanceled, RunFailed
from mltrain.base.home import mltrain_home
from mltrain.jobspec.status import CANCELED, FAILED, TERMINAL
from mltrain.pipelines.view import PipelineView
from mltrain.ranks.process import follow
from mltrain.runs import mlflow_run
from mltrain.runs.index import Row
from mltrain.runs.metrics import read_metrics, summarize
from mltrain.runs.record import RunRecord, find_run, iter_runs
from mltrain.runs.waiting import wait_until


def backend_of(record: RunRecord) -> Any:
    """The backend that runs (ran) this record's run, or for a pipeline's own run, the view that follows
    its steps' runs on theirs."""
    if record.is_pipeline:
        return PipelineView(refresh, backend_of)
    return backends.backend_of(record)


def refresh(records: List[RunRecord]) -> None:
    """Bring runs that have not ended up to date (mltrain.backends.refresh). The command that started
    a run mirrors it into MLflow before it returns; a detached run (or a pipeline's step) has no such
    command, so the look that sees it end does."""
    ended = backends.refresh(records, backend_of)
    if ended:
        mlflow_run.mirror_now(str(r.dir) for r in ended if not driver_alive(r))


def list_runs(root: Path, unreadable: Optional[List[Path]] = None) -> List[RunRecord]:
    """Every run under `root`, up to date, most recent first (unreadable ones go to `unreadable`)."""
    records = list(iter_runs(root, unreadable))
    refresh(records)
    return sorted(records, key=lambda r: r.created, reverse=True)


def refresh_rows(root: Path, rows: List[Row], unreadable: Optional[List[Path]] = None) -> List[Row]:
    """Rows of the runs index (mltrain.runs.index.scan) with the runs that have not ended read from
    their folders and brought up to date by their backends, as list_runs does; a final status is
    taken as the index holds it (checked against its run.json)."""
    records: List[RunRecord] = []
    for row in rows:
        if row.status not in TERMINAL:
            try:
                records.append(RunRecord.load(root / row.folder))
            except MltrainError:  # damaged since the index looked
                if unreadable is not None:
                    unreadable.append(root / row.folder)
    refresh(records)
    fresh = {r.dir.name: Row.of(r.dir.name, r.doc) for r in records}
    return [fresh.get(row.folder, row) for row in rows if row.status in TERMINAL or row.folder in fresh]


class Run:
    """A handle on one run directory; every property reads the run record afresh."""

    def __init__(self, run_dir: Union[str, Path], driver: Optional[subprocess.Popen] = None) -> None:
        self.run_dir = Path(run_dir)
        self._driver = driver

    @classmethod
    def get(cls, run_id: str, root: Optional[Union[str, Path]] = None) -> Run:
        """A run by id, unique id prefix or directory (under $MLTRAIN_HOME/runs unless `root` is given)."""
        return cls(find_run(Path(root).expanduser() if root else mltrain_home() / "runs", run_id).dir)

    @property
    def id(self) -> str:
        return self.run_dir.name

    def load(self) -> RunRecord:
        """The run's record, brought up to date by its backend."""
        record = RunRecord.load(self.run_dir)
        refresh([record])
        return record

    @property
    def record(self) -> Dict[str, Any]:
        return self.load().to_json()

    @property
    def status(self) -> str:
        return self.load().status

    @property
    def outputs_dir(self) -> Path:
        return self.run_dir / "outputs"

    def log_path(self, rank: Optional[int] = 0) -> Path:
        """A rank's log (rank 0 by default), or with rank=None the launcher's own."""
        record = RunRecord.load(self.run_dir)
        return record.log_path(None if record.is_pipeline else rank)  # a pipeline's own run has one log

    def logs(self, rank: Optional[int] = 0) -> str:
        path = self.log_path(rank)
        if not path.is_file():
            raise MltrainError(f"run {self.id} has no log at {path} (yet)")
        return path.read_text(encoding="utf-8", errors="replace")

    def _done(self, status: str) -> bool:
        if status not in TERMINAL:
            return False
        return self._driver is None or self._driver.poll() is not None

    def wait(self, show_output: bool = False, raise_on_error: bool = True, timeout: Optional[float] = None) -> str:
        """Block until the run ends; with show_output, stream rank 0's log and status changes."""
        seen: Dict[str, Any] = {"offset": 0, "status": None}
        poll = backend_of(RunRecord.load(self.run_dir)).wait_poll_s
        log_path = self.log_path(0)

        def ended() -> bool:
            status = self.load().status  # read before the log, so nothing written before the end is missed
            if show_output:
                if status != seen["status"]:
                    print(f"mltrain: {self.id}: {status}", flush=True)
                    seen["status"] = status
                chunk, seen["offset"] = follow(log_path, seen["offset"])
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
            return self._done(status)

        if not wait_until(ended, timeout, poll):
            raise TimeoutError(f"run {self.id} still {self.load().status} after {timeout}s")
        record = RunRecord.load(self.run_dir)
        if raise_on_error and record.status in (FAILED, CANCELED):
            error = RunCanceled if record.status == CANCELED else RunFailed
            raise error(f"run {self.id} {record.status}: {record.doc.error or ''}".strip())
        return record.status

    def cancel(self) -> str:
        """Stop every rank (scancel on Slurm); the run ends Canceled. Returns its final status."""
        record = self.load()
        if record.status not in TERMINAL:
            backend_of(record).cancel(record)
        return RunRecord.load(self.run_dir).status

    def metrics(self, name: Optional[str] = None) -> Dict[str, Any]:
        """{name: value} for metrics logged once, {name: [values]} otherwise (Azure: get_metrics)."""
        return summarize(read_metrics(self.run_dir / "metrics.jsonl"), name)

    def get_file_names(self) -> List[str]:
        skip = {"snapshot"}
        return sorted(str(p.relative_to(self.run_dir)) for p in self.run_dir.rglob("*")
                      if p.is_file() and p.relative_to(self.run_dir).parts[0] not in skip)

    def download(self, path: str = "outputs") -> List[str]:
        """Bring `path` of the run's folder (default: its outputs) from the cluster it ran on into its folder here
        (`mltrain runs download`); returns the files brought. Nothing to bring for a run of this machine."""
        record = self.load()
        return backend_of(record).fetch(record, path)

    def bring(self, path: str) -> Path:
        """`path` of the run's folder, here: brought from the cluster the run ran on when it is not here yet (a run
        on a remote cluster keeps its outputs there until asked). It may not exist: the caller says so."""
        local = self.run_dir / path
        if not local.exists():
            self.download(path)
        return local

    def download_file(self, name: str, output_file_path: Optional[str] = None) -> str:
        """Copy a file of the run (e.g. 'outputs/model.pt') to output_file_path (default: its base name)."""
        source = self.bring(name)
        if not source.is_file():
            raise MltrainError(f"run {self.id} has no file '{name}' (files: {', '.join(self.get_file_names()[:20])})")
        target = Path(output_file_path or Path(name).name)
        if target.is_dir():
            target = target / Path(name).name
        shutil.copyfile(source, target)
        return str(target)

    def register_model(self, model_name: str, model_path: str, tags: Optional[Dict[str, str]] = None,
                       properties: Optional[Dict[str, str]] = None, description: Optional[str] = None):
        """Register a file or folder of this run (e.g. 'outputs/model') as the next version of model_name."""
        from mltrain.models.registry import Model  # startup

        self.bring(model_path)
        return Model.register(model_name, model_path, run=str(self.run_dir), tags=tags, properties=properties,
                              description=description)

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, dir={str(self.run_dir)!r})"
