"""What Slurm's accounting says about jobs: `sacct` output read into states and times, and Slurm's
states mapped to run statuses. The parsing is pure, so it is tested on recorded sacct text."""
from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

from mltrain.spec.status import CANCELED, COMPLETED, FAILED, QUEUED, RUNNING

# Slurm job state -> run status (sacct names; submitit reports them as they are).
STATES = {
    "PENDING": QUEUED, "REQUEUED": QUEUED, "REQUEUE_HOLD": QUEUED, "REQUEUE_FED": QUEUED, "SUSPENDED": QUEUED,
    "CONFIGURING": QUEUED, "RUNNING": RUNNING, "COMPLETING": RUNNING, "COMPLETED": COMPLETED,
    "CANCELLED": CANCELED, "FAILED": FAILED, "TIMEOUT": FAILED, "NODE_FAIL": FAILED, "OUT_OF_MEMORY": FAILED,
    "PREEMPTED": QUEUED, "BOOT_FAIL": FAILED, "DEADLINE": FAILED,
}
FIELDS = "JobID,State,Start,End"


@dataclass(frozen=True)
class JobState:
    state: str  # sacct's word ('CANCELLED by 0' -> CANCELLED); UNKNOWN when sacct does not list it
    start: Optional[float] = None
    end: Optional[float] = None

    @property
    def status(self) -> Optional[str]:
        return STATES.get(self.state)


def _when(text: str) -> Optional[float]:
    if not text or text in ("Unknown", "None"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse(text: str, job_ids: List[str]) -> Dict[str, JobState]:
    """`sacct -X -n -P -o JobID,State,Start,End` output, for the given ids. Array members not started
    yet are listed together as '<id>_[0-2]' and reported PENDING."""
    states: Dict[str, JobState] = {}
    pending_arrays = set()
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 2:
            continue
        jid, state = parts[0], (parts[1].split() or ["UNKNOWN"])[0].upper()
        start = _when(parts[2]) if len(parts) > 2 else None
        end = _when(parts[3]) if len(parts) > 3 else None
        states[jid] = JobState(state, start, end)
        if "_[" in jid:
            pending_arrays.add(jid.split("_[")[0])
    out = {}
    for jid in job_ids:
        if jid in states:
            out[jid] = states[jid]
        elif jid.split("_")[0] in pending_arrays:
            out[jid] = JobState("PENDING")
        else:
            out[jid] = JobState("UNKNOWN")
    return out


def query(job_ids: List[str]) -> Dict[str, JobState]:
    """One sacct call for every job; asked directly rather than through submitit's watcher, whose
    cache adds seconds to every change."""
    if not job_ids:
        return {}
    try:
        out = subprocess.run(["sacct", "-j", ",".join(job_ids), "-X", "-n", "-P", "-o", FIELDS],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return parse(out, job_ids)


def scancel(job_ids: List[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], check=False, timeout=30, capture_output=True)
