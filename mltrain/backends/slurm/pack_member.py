"""One member run inside a packed worker (mltrain.backends.slurm.pack says what packing is): as an unpacked
member's task runs it (SlurmRank), with its cancel watched and its end recorded by the worker, which owns
its run.json meanwhile."""
from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Dict, Optional

from mltrain.backends.slurm.rank import SlurmRank
from mltrain.backends.slurm.run_part import NAME
from mltrain.base.errors import RunFailed
from mltrain.base.processes import stop_group
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, RUNNING, TERMINAL
from mltrain.ranks import reports
from mltrain.runs.console import RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord


def run_member(run_dir: Path, owner: str, folder: str, stopping: Optional[threading.Event] = None,
               env: Optional[Dict[str, str]] = None, running: Optional[Dict[int, SlurmRank]] = None, slot: int = 0) -> str:
    """Run one member in this worker and record its end (this worker owns its run.json meanwhile); Queued
    when the worker was stopped under it: the caller puts it back in the queue. `env` (a GPU slot's devices)
    is set for its program; `running` gets its rank under `slot` while it runs (pack_slots signals it)."""
    record = RunRecord.load(run_dir)
    log = RunLog(record.log_path(), None)
    asked = record.cancel_requested()
    if asked or record.status in TERMINAL:
        return record.status if record.status in TERMINAL else finish(record, CANCELED, asked)
    part = record.doc.backend_parts.get(NAME) or {}
    record.update(backend_parts={NAME: {**part, "job_id": owner, "submitit_folder": folder}})
    record.set_status(RUNNING)
    log.info(f"{RUNNING} in packed Slurm job {owner}")
    rank = SlurmRank(str(run_dir), own_session=True, env=env)
    if running is not None:
        running[slot] = rank
    done = threading.Event()
    watcher = threading.Thread(target=_watch_cancel, args=(record, rank, done), daemon=True)
    watcher.start()
    try:
        rank()
        code = 0
    except RunFailed:
        code = 1
    finally:
        done.set()
        if running is not None:
            running.pop(slot, None)
    watcher.join()
    record.reload()
    reports.copy_to_record(record)  # its node and devices, however it ended, as an unpacked run's driver records them
    reason = record.cancel_requested()
    # Slurm's SIGTERM to the worker reaches the member's processes too: a program that ends on it with 0 (a
    # shell's `sleep 3; echo done`, a trainer saving on SIGTERM) did not finish its work, so it runs again
    stopped = stopping is not None and stopping.is_set()
    if code == 0 and not stopped:
        return finish(record, COMPLETED)
    if reason:
        return finish(record, CANCELED, reason)
    if stopped:
        return requeue(record, f"its worker, Slurm job {owner}, was stopped under it")
    failed_rank, error = reports.failure(record)
    return finish(record, FAILED, error, failed_rank)


def requeue(record: RunRecord, why: str) -> str:
    """A member to run again in another worker: a new attempt, Queued (the caller puts it back in the queue)."""
    record.reopen()
    record.set_status(QUEUED)
    RunLog(record.log_path(), None).info(f"{QUEUED} again: {why}")
    return QUEUED


def _watch_cancel(record: RunRecord, rank: SlurmRank, done: threading.Event, grace_s: float = 5.0) -> None:
    """A cancel of this member (`runs cancel`, a sweep policy, the sweep's own cancel) stops its program."""
    while not done.wait(0.2):
        if record.cancel_requested() is None:
            continue
        proc = rank.program
        if proc is None:
            continue
        stop_group(proc.pid, ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)), done.wait)
        return
