"""From frozen jobs to final statuses: create every run (directory, frozen config, snapshot), hand
them to their backend, and summarize. `mltrain`, `mltrain -m`, `runs resume` and the plain-Hydra
adapter all come through here.

Every member is frozen and has its run directory before the first one starts, so a bad value in
the third member of a sweep stops the sweep before anything runs, and editing the source while a
member waits changes nothing.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional

from mltrain import backends
from mltrain.backends.base import earlier_ranks_gone, failure_text
from mltrain.backends.handover import Cancel, Submission
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.base.signals import SignalsSetEvent
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.status import CANCELED, FAILED, TERMINAL
from mltrain.runs import mlflow_run
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord


@dataclass
class RunResult:
    job: FrozenJob
    status: str
    error: Optional[str] = None

    @property
    def run_dir(self) -> str:
        return self.job.run_dir


class CancelOnSignal(SignalsSetEvent):
    """SIGINT/SIGTERM on the driver cancel every run in flight instead of killing the driver (the event is
    set by a thread of its own: mltrain.base.signals says why)."""

    def __init__(self, cancel: threading.Event) -> None:
        super().__init__(cancel)
        self.cancel = cancel


def create_run(job: FrozenJob, console: Console, payload: Optional[bytes] = None) -> RunRecord:
    """The run's directory, its frozen config and, for script jobs, the source snapshot."""
    try:
        record = RunRecord.create(job)
    except FileExistsError:
        raise ConfigError("run.id", f"a run already exists at {job.run_dir}; run directories are never reused") from None
    except OSError as exc:
        raise ConfigError("run.root", f"cannot create {job.run_dir}: {exc.strerror}") from None
    console.status(f"run {job.run_id}  {job.run_dir}")
    try:
        _fill(record, job, console, payload)
    except Exception as exc:  # the directory exists: the run must end with a status, never stay NotStarted
        reason = f"preparing the run failed: {failure_text(exc)}"
        finish(record, FAILED, error=reason, console=console)
        raise MltrainError(f"run {job.run_id} Failed: {reason}") from None
    return record


def complete_run(record: RunRecord, job: FrozenJob, console: Console) -> None:
    """Finish making a run whose driver died between writing its run.json and its snapshot (a run that is
    to run again): what create_run does after run.json, with a partial snapshot removed first."""
    if job.snapshot_source and record.doc.snapshot is None:
        shutil.rmtree(job.cwd, ignore_errors=True)
        _fill(record, job, console, None)


def _fill(record: RunRecord, job: FrozenJob, console: Console, payload: Optional[bytes]) -> None:
    from mltrain.launch import snapshot  # startup

    mlflow_run.seed_run_db(record.dir, job.env)
    if payload is not None:  # a plain Hydra app's pickled task function, read by its ranks
        (record.dir / "task.pkl").write_bytes(payload)
    if job.snapshot_source:
        info = snapshot.take(job.snapshot_source, job.cwd, exclude=snapshot.own_folders(job.run_dir))
        snapshot.link_run_folders(Path(job.cwd), record.dir)
        record.update(snapshot=info.to_json())
        RunLog(record.log_path(), console).info(
            f"snapshot of {info.source}: {info.files} files, {info.bytes / 1024:.0f} KB, sha256 {info.hash[:12]}, "
            f"{info.seconds:.2f}s" + (f" (ignore rules: {', '.join(info.ignore_files)})" if info.ignore_files else ""))
        if info.warning:
            console.status(f"warning: {info.warning}")


def consoles_for(jobs: List[FrozenJob]) -> List[Console]:
    """A sweep's members each get a `[#N]` prefix; a lone run prints bare."""
    if len(jobs) == 1:
        return [Console()]
    return [Console(prefix=f"[#{job.sweep_index}] ") for job in jobs]


def execute(jobs: List[FrozenJob], records: List[RunRecord], consoles: List[Console],
            cancel: Optional[threading.Event] = None) -> List[RunResult]:
    """Hand the runs to their backend (one backend per sweep: its members differ in values only).
    `cancel`: an event a caller's own signal handler may already have set (a driver canceled as it started)."""
    backend = backends.get(jobs[0].backend)
    cancel = cancel if cancel is not None else threading.Event()
    # MLflow's copy of the runs that ended, made before this command returns; the mirror program starts
    # now so that its start-up overlaps the runs (0.1 s of a 0.6 s job otherwise: benchmarks/bench_mirror.py).
    # A detached run is mirrored by the look that sees it end (mltrain.python_api.handle): mirroring 100 queued members
    # at once was seconds of CPU competing with the members' own start and the next command.
    with mlflow_run.mirror_started(not jobs[0].detach) as mirror, CancelOnSignal(cancel) as guard:
        share = max(1, min(backend.concurrency(jobs[0].compute) or 1, len(jobs)))
        statuses = backend.launch([backend.plan(job, share) for job in jobs], records, consoles, cancel)
    results = [RunResult(job, status, record.doc.error) for job, status, record in zip(jobs, statuses, records)]
    if mirror is not None:
        mirror.run(job.run_dir for job, status in zip(jobs, statuses) if status in TERMINAL)
    if guard.signum is not None:
        for r in results:
            if r.status not in TERMINAL:
                r.status = CANCELED
    return results


def submit(job: FrozenJob, record: RunRecord, console: Console, share: int = 1) -> Submission:
    """One run handed to its backend, which takes it at once and returns its Submission (a sweep's member, a
    pipeline's step): with `execute` and `queue_after`, the engines' one way to a backend. `share`: how many runs of
    the same command may run at once (a backend divides its slots among them)."""
    backend = backends.get(job.backend)
    return backend.submit(backend.plan(job, share=share), record, console)


def queue_after(job: FrozenJob, parents: List[RunRecord], record: RunRecord, console: Console) -> str:
    """A pipeline's step queued behind its parents on a backend that holds the graph itself (Slurm's afterok),
    detached; returns the status it was left in (Queued, or why not)."""
    backend = backends.get(job.backend)
    held = backend.after(dataclasses.replace(job, detach=True), parents)
    return backend.launch([backend.plan(held)], [record], [console], Cancel())[0]


def run_all(jobs: List[FrozenJob], payloads: Optional[List[bytes]] = None) -> List[RunResult]:
    consoles = consoles_for(jobs)
    records: List[RunRecord] = []
    try:
        for job, console, payload in zip(jobs, consoles, payloads or [None] * len(jobs)):
            records.append(create_run(job, console, payload))
    except MltrainError as exc:
        for record, console in zip(records, consoles):  # members created before it never start
            finish(record, CANCELED, error=f"not started: another member could not be created ({exc})", console=console)
        raise
    return execute(jobs, records, consoles)


def resume(record: RunRecord, detach: bool = False) -> RunResult:
    """Run a stopped run again from its frozen job, on the backend it was frozen for; built-in
    components continue from their checkpoint."""
    backends.refresh([record])  # a run whose driver was just killed reads Failed "driver lost" from here, as a look shows it
    if record.status not in (FAILED, CANCELED):
        raise MltrainError(f"run {record.id} is {record.status}; only Failed or Canceled runs can be resumed")
    earlier_ranks_gone(record)
    if not (record.dir / "job.json").is_file():  # a deferred member whose config was refused (launch.deferred)
        raise MltrainError(f"run {record.id} was never made, so it cannot be resumed: {record.error}")
    # Whether to wait is this command's choice, not the one frozen with the first submission.
    job = dataclasses.replace(FrozenJob.load(record.dir), detach=detach)
    record.reopen()
    return execute([job], [record], [Console()])[0]


def summary_rows(results: List[RunResult]) -> List[Dict[str, Any]]:
    return [{"index": r.job.sweep_index, "run_id": r.job.run_id, "status": r.status, "run_dir": r.run_dir,
             "overrides": r.job.overrides} for r in results]


def write_sweep_summary(sweep_dir: Optional[str], rows: List[Dict[str, Any]]) -> None:
    """<sweep>/summary.json: one row per member (index, run id, status, run folder, overrides)."""
    if not sweep_dir or len(rows) < 2:
        return
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    atomic_write(Path(sweep_dir) / "summary.json", json.dumps(rows, indent=2))


def print_summary(rows: List[Dict[str, Any]], console: Console) -> None:
    if len(rows) < 2:
        return
    console.status(f"sweep of {len(rows)} runs:")
    # the sweep's folder is every member's (a remote sweep's is the laptop's override): not repeated on each line
    console.write_line("\n".join(f"  #{r['index']} {r['status']:<9} {' '.join(_shown(r['overrides'])):<40} {r['run_dir']}"
                                 for r in rows))  # one write: a 10,000-member sweep's lines


def _shown(overrides: List[str]) -> List[str]:
    return [o for o in overrides if not o.startswith("hydra.sweep.dir=")]
