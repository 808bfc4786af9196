"""The workers of a packed queue (mltrain.backends.slurm.pack says what packing is), kept by whichever process
drives its members: the sweep's driver while it lives, and a `runs resume` of the sweep that follows members
the dead driver left in the queue.

Each tend counts the members waiting (`todo/`) and under way (`claimed/`) and the workers there are: those
this process submitted and that have not left, those of any process with a fresh heartbeat, and those another
process submitted (each leaves `workers/ID.submitted`) that Slurm still holds PENDING, CONFIGURING or RUNNING
but that have not beaten yet. It submits what is missing, up to the pool's size (`wanted`). A member is taken
by one worker only (the rename in pack.claim), so a worker too many takes nothing and leaves; a worker too few
would leave a member waiting for ever. What the workers ask Slurm for is kept in the queue folder (POOL_FILE)
by the first driver, so that a later process submits the same workers.
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

from mltrain.backends.slurm import accounting
from mltrain.backends.slurm.pack import (
    CLOSED,
    STALE_S,
    PackWorker,
    _dirs,
    end_queued,
    is_deferred,
    release,
    worker_submission,
)
from mltrain.backends.slurm.pack_member import requeue
from mltrain.base.atomic import atomic_write
from mltrain.jobspec.status import CANCELED, FAILED, TERMINAL
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: Times a member whose worker was lost runs again.
RERUNS = 1
#: The pool's size and its workers' Slurm request, for any later process that keeps the pool.
POOL_FILE = "pool.json"
#: Slurm's states of a worker that is there or will be (squeue's words): it will take members.
COMING = ("PENDING", "CONFIGURING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED")
SQUEUE_TIMEOUT_S = 20.0
#: Workers Slurm holds that have not started (a requeued one waits as PENDING, Reason BeginTime).
NOT_STARTED = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "SUSPENDED")


def wanted(size: int, todo: int, claimed: int, live: int) -> int:
    """Workers to submit: as many as the members waiting and under way need, up to the pool's size, less those
    there are (pending in Slurm included), never more than the members waiting; none when none waits."""
    if todo <= 0:
        return 0
    return max(0, min(min(size, todo + claimed) - live, todo))


def parse_squeue(text: str) -> Dict[str, str]:
    """`squeue -h -o %i|%T` output as {job id: state}."""
    out = {}
    for line in text.splitlines():
        jid, _, state = line.strip().partition("|")
        if jid and state:
            out[jid] = state.strip().upper()
    return out


def in_slurm(job_ids: List[str]) -> Optional[Dict[str, str]]:
    """Slurm's current state of each job it still holds ({} when it holds none of them); None when squeue did
    not answer (the caller counts none of them, and asks again later)."""
    if not job_ids:
        return {}
    try:
        proc = subprocess.run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i|%T"], capture_output=True,
                              text=True, timeout=SQUEUE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:  # every id has left slurmctld's memory: squeue refuses the list as invalid
        return {} if "invalid job id" in proc.stderr.lower() else None
    return parse_squeue(proc.stdout)


@dataclass
class Pool:
    """The workers of one queue, as this process knows them."""

    pack_dir: Path
    params: Dict[str, Any]
    size: int
    max_requeues: int
    submitted: Dict[str, float] = field(default_factory=dict)  # worker job id -> when submitted
    lock: threading.Lock = field(default_factory=threading.Lock)
    reruns: Dict[str, int] = field(default_factory=dict)
    asked: float = 0.0
    interval: float = 5.0
    following: int = 0  # launch() calls of this driver following members of this queue
    slots: int = 1  # members each worker runs at once (compute.pack_slots)
    _coming: List[str] = field(default_factory=list)  # other processes' workers Slurm held, at the last look
    _looked: float = float("-inf")
    _closed: bool = False

    def close(self) -> None:
        """No more members will come: the workers leave once the queue is empty, without waiting IDLE_S. Those of
        this process's workers still held by Slurm when the queue is empty are cancelled: a worker requeued
        (`scontrol requeue`, a preemption) waits in Slurm's queue and would start after the sweep had ended, only
        to leave (chaos seed 17: the sweep Completed with its worker job still queued)."""
        if self._closed and (self.pack_dir / CLOSED).exists():  # and nothing queued since (enqueue removes it)
            return
        try:
            (self.pack_dir / CLOSED).touch()
            empty = not os.listdir(self.pack_dir / "todo") and not os.listdir(self.pack_dir / "claimed")
        except OSError:  # the sweep's folder is gone: so are its workers' reasons to wait
            return
        # Every worker of the queue, an earlier driver's too (a resumed sweep's: chaos seed 140 left the killed
        # driver's worker running): a requeued worker left its first incarnation's `.gone` behind, so Slurm, not the
        # folder, says who still waits.
        workers = set(self.submitted) | {p.stem for p in (self.pack_dir / "workers").glob("*.submitted")}
        if not empty or not workers:
            return
        self._closed = True  # a second close (this process's exit, after the sweep's own) asks Slurm nothing
        held = in_slurm(sorted(workers))
        # Only those that have not started: a running worker sees the queue closed and empty and leaves by itself
        # (its job COMPLETED); one waiting in Slurm's queue would start for nothing, after the sweep has ended.
        waiting = sorted(w for w, state in (held or {}).items() if state in NOT_STARTED)
        if waiting:
            accounting.scancel(waiting)

    def tend(self, now: Optional[float] = None) -> None:
        """Start workers while queued members outnumber them; find lost workers and run their members again."""
        now = time.monotonic() if now is None else now
        with self.lock:
            self._lost(now)
            todo = len(os.listdir(self.pack_dir / "todo"))
            claimed = len(os.listdir(self.pack_dir / "claimed"))
            live = self._own_live() + self._others_alive()  # an earlier driver's workers (a resumed sweep) count too
            want = wanted(self.size, todo, claimed, len(live))
            if want > 0:  # only then is Slurm asked about the workers that have not beaten yet
                want = wanted(self.size, todo, claimed, len(live) + len(self._others_coming(now, set(live))))
            if want > 0:
                self._submit(want)

    def _own_live(self) -> List[str]:
        return [w for w in self.submitted if not self._left(w)]

    def _left(self, worker: str) -> bool:
        workers = self.pack_dir / "workers"
        return (workers / f"{worker}.gone").exists() or (workers / f"{worker}.lost").exists()

    def _others_alive(self) -> List[str]:
        out = []
        for path in (self.pack_dir / "workers").glob("*.alive"):
            try:
                fresh = time.time() - path.stat().st_mtime <= STALE_S
            except FileNotFoundError:
                continue
            if fresh and path.stem not in self.submitted:
                out.append(path.stem)
        return out

    def _others_coming(self, now: float, counted: Set[str]) -> List[str]:
        """Workers another process submitted that have not beaten (queued in Slurm, or starting) and that Slurm
        still holds; asked of squeue at most once per interval."""
        others = [p.stem for p in (self.pack_dir / "workers").glob("*.submitted")
                  if p.stem not in self.submitted and p.stem not in counted and not self._left(p.stem)]
        if not others:
            return []
        if now - self._looked >= self.interval:
            states = in_slurm(others)
            if states is not None:
                self._looked = now
                self._coming = [w for w, state in states.items() if state in COMING]
        return [w for w in others if w in self._coming]

    def _submit(self, count: int) -> None:
        from mltrain.backends.slurm.submission import make_executor  # heavy

        executor = make_executor(worker_submission(self.pack_dir, self.params), self.pack_dir / "submitit",
                                 self.max_requeues)
        with executor.batch():
            jobs = [executor.submit(PackWorker(str(self.pack_dir), int(self.params["timeout_min"]), self.slots))
                    for _ in range(count)]
        for job in jobs:
            self.submitted[str(job.job_id)] = time.monotonic()
            (self.pack_dir / "workers" / f"{job.job_id}.submitted").touch()  # for a later process's count

    def _lost(self, now: float) -> None:
        """Workers whose heartbeat stopped (or that never started) and that accounting says have ended."""
        workers = self.pack_dir / "workers"
        doubtful = []
        for w, when in self.submitted.items():
            alive = workers / f"{w}.alive"
            if self._left(w):
                continue
            try:
                stale = time.time() - alive.stat().st_mtime > STALE_S
            except FileNotFoundError:
                stale = now - when > self.interval  # queued, or lost before it began
            if stale:
                doubtful.append(w)
        if not doubtful or now - self.asked < self.interval:
            return
        self.asked = now
        states = accounting.query(doubtful)
        for w in doubtful:
            state = states.get(w)
            if state is not None and state.status in TERMINAL:
                (workers / f"{w}.lost").write_text(state.state, encoding="utf-8")
                self._rerun_members_of(w, state.state)

    def _rerun_members_of(self, worker: str, state: str) -> None:
        for claimed in os.listdir(self.pack_dir / "claimed"):
            entry, _, owner = claimed.partition("@")
            if owner != worker:
                continue
            content = (self.pack_dir / "claimed" / claimed).read_text(encoding="utf-8")
            if is_deferred(content):  # lost before its member was made: nothing ran
                release(self.pack_dir, entry, owner, again=True)
                continue
            record = RunRecord.load(content)
            if record.status in TERMINAL:
                release(self.pack_dir, entry, owner)
                continue
            why = f"its worker, Slurm job {worker}, ended {state}"
            if self.reruns.get(entry, 0) >= RERUNS or record.cancel_requested():
                release(self.pack_dir, entry, owner)
                finish(record, FAILED, why + " (run again once already)")
                continue
            self.reruns[entry] = self.reruns.get(entry, 0) + 1
            requeue(record, why)
            release(self.pack_dir, entry, owner, again=True)

    def cancel_queued(self, entries: List[str], reason: str, status: str = CANCELED) -> None:
        """Members no worker has taken yet end here (Canceled, or Failed when no worker could be submitted);
        those under way are asked (their worker stops them)."""
        end_queued(self.pack_dir, entries, "driver", reason, status)

    def stop(self) -> None:
        accounting.scancel(list(self.submitted))


_pools: Dict[str, Pool] = {}
_pools_lock = threading.Lock()


def pool_for(pack_dir: Path, params: Dict[str, Any], size: int, max_requeues: int, slots: int = 1) -> Pool:
    """One pool per queue in this process: a HyperDrive sweep's members, launched one by one, share it. The
    first driver of the queue leaves what its workers are (POOL_FILE) for a later process (`saved_pool`)."""
    with _pools_lock:
        key = str(pack_dir)
        if key not in _pools:
            _dirs(pack_dir)
            if not (pack_dir / POOL_FILE).exists():
                atomic_write(pack_dir / POOL_FILE, json.dumps({"params": params, "size": size,
                                                               "max_requeues": max_requeues, "slots": slots}))
            if not _pools:
                atexit.register(close_all)
            _pools[key] = Pool(pack_dir, params, size, max_requeues, slots=slots)
        return _pools[key]


def close_all() -> None:
    """At this process's exit, its queues get no more members from it. A HyperDrive sweep launches its members one
    by one, so no launch closes the queue: its workers waited IDLE_S for more, and a requeued one waited in
    Slurm's queue past the sweep's end (chaos seeds 17, 41, 65)."""
    with _pools_lock:
        pools = list(_pools.values())
    for pool in pools:
        if not pool.following:
            pool.close()


def saved_pool(pack_dir: Path) -> Optional[Pool]:
    """The queue's pool in this process, as its first driver made it; None for a queue that does not say
    (made before POOL_FILE was kept)."""
    with _pools_lock:
        if str(pack_dir) in _pools:
            return _pools[str(pack_dir)]
    try:
        saved = json.loads((pack_dir / POOL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return pool_for(pack_dir, dict(saved["params"]), int(saved["size"]), int(saved["max_requeues"]),
                    int(saved.get("slots", 1)))
