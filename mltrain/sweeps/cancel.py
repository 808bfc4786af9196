"""`mltrain runs cancel SWEEP`: every member of a grid sweep (`mltrain -m` over values, its folder holding
summary.json) that has not ended ends Canceled. Members no worker has taken yet end without starting (a
deferred member, mltrain.launch.deferred, is never made); those under way are stopped as `runs cancel RUN`
stops one. A detached sweep of thousands of members is stopped by one command, not one per member.

A HyperDrive sweep is stopped through its driver, which cancels its members and records why (sweep.json).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from mltrain import backends
from mltrain.backends.slurm import pack_driver
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.jobspec.status import CANCELED, TERMINAL
from mltrain.runs.record import RunRecord
from mltrain.sweeps.results import SWEEP_FILE

SUMMARY = "summary.json"


@dataclass
class SweepCancel:
    canceled: int  # members stopped or ended here
    never_made: int  # deferred members taken out of the queue before a worker made them
    had_ended: int


def locate(ref: str, runs_root: Path) -> Optional[Path]:
    """The grid sweep folder `ref` names (a folder, or a sweep's name under <runs>/_sweeps), or None."""
    for path in (Path(ref).expanduser(), runs_root / "_sweeps" / ref):
        if (path / SUMMARY).is_file() or (path / SWEEP_FILE).is_file():
            return path.resolve()
    return None


def cancel(folder: Path, reason: str = "canceled by the user") -> SweepCancel:
    if (folder / SWEEP_FILE).is_file():
        raise MltrainError(f"{folder.name} is a HyperDrive sweep: stop its driver (Ctrl-C, or kill its process), "
                           "which cancels its members; or cancel members one by one with `mltrain runs cancel RUN`")
    try:
        rows = json.loads((folder / SUMMARY).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MltrainError(f"cannot read {folder / SUMMARY}: {exc}") from None
    dropped, held = pack_driver.cancel_queues(folder, reason)
    never = set(dropped)
    folders = {Path(str(row["run_dir"])) for row in rows if row.get("run_id") not in never} | set(held)
    live: List[RunRecord] = []
    ended = 0
    for run_dir in sorted(folders):
        if not (run_dir / "run.json").is_file():
            continue
        record = RunRecord.load(run_dir)
        if record.status in TERMINAL:
            ended += 1
            continue
        record.request_cancel(reason)  # all asked first: their workers or drivers stop them side by side
        live.append(record)
    for record in live:
        record.reload()
        if record.status not in TERMINAL:
            backends.backend_of(record).cancel(record)
    for row in rows:
        run_dir = Path(str(row["run_dir"]))
        if row.get("run_id") in never:
            row["status"] = CANCELED
        elif (run_dir / "run.json").is_file():
            row["status"] = RunRecord.load(run_dir).status
    atomic_write(folder / SUMMARY, json.dumps(rows, indent=2))
    stopped = sum(1 for record in live if RunRecord.load(record.dir).status == CANCELED)
    return SweepCancel(stopped + len(never), len(never), ended + len(live) - stopped)  # some end by themselves
