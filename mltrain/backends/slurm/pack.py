"""Packing (`compute.pack=N`): a sweep's members run inside at most N Slurm jobs, the workers, instead of
one job (array task) each. Each worker takes the next member from the sweep's queue, runs it as an
unpacked member's task runs it (mltrain.backends.slurm.rank.SlurmRank: a plain Hydra app's task in a fork
of the worker, which imported Hydra once), records its end and takes the next, until the queue stays
empty for IDLE_S. Slurm then schedules N jobs, not one per member (hydra #2632, #2786; submitit #1734).

The queue is a folder beside the sweep, `pack/<group>/` (one per resource group: members that ask Slurm
for different resources get workers of their own), whose entries move by rename, atomic on the shared
file system: `todo/SEQ` (the member's run folder) -> `claimed/SEQ@WORKER` -> `done/SEQ`. Whoever renames
an entry owns the member: a worker, or the driver for a member it cancels before any worker took it. A
worker keeps `workers/WORKER.alive` fresh while it lives and renames it `.gone` when it leaves, so the
driver asks Slurm's accounting only about workers whose heartbeat stopped: a worker lost with its node
has its member run again elsewhere, once (mltrain.backends.slurm.pack_pool keeps the workers). Members run
one process each (world size 1).
"""
from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from mltrain.backends.slurm.pack_member import run_member
from mltrain.backends.slurm.rank import SlurmRank
from mltrain.backends.slurm.run_part import NAME
from mltrain.jobspec.status import CANCELED, QUEUED, TERMINAL
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: Seconds a worker waits on an empty queue before it leaves (members of a HyperDrive sweep arrive as
#: others end; a plain sweep's are all queued before the first worker starts).
IDLE_S = 5.0
#: A heartbeat older than this makes the driver ask accounting whether the worker still runs.
STALE_S = 15.0
HEARTBEAT_S = 1.0
#: A deferred sweep's member maker (pickled by its driver: mltrain.launch.deferred), and what it could not make.
DEFERRED = "deferred.pkl"
DEFERRED_ERRORS = "deferred_errors.log"
#: Written when the sweep is canceled (`runs cancel SWEEP`): workers take no more members.
STOPPED = "stopped"
#: Written when no more members will come (the workers then leave as soon as the queue is empty).
CLOSED = "closed"
#: The folder the queue's first driver ran in: every worker of the queue starts there (Slurm's --chdir), so a
#: member its worker makes (mltrain.launch.deferred) reads relative paths as its driver read them, also when
#: a later driver (`runs resume` from elsewhere) submits the workers. Set by Slurm, not by os.chdir in the
#: worker, whose GPU slots are threads sharing one working directory.
DRIVER_CWD = "driver_cwd"


def pack_part(pack_dir: Path, entry: str) -> Dict[str, Any]:
    return {"pack": str(pack_dir), "entry": entry}


def packed_in(record: RunRecord) -> Optional[Tuple[Path, str]]:
    """(queue folder, entry) of a packed member, or None for a run that is a Slurm job of its own."""
    part = record.doc.backend_parts.get(NAME) or {}
    return (Path(part["pack"]), str(part["entry"])) if part.get("pack") else None


def _dirs(pack_dir: Path) -> None:
    for sub in ("todo", "claimed", "done", "workers"):
        (pack_dir / sub).mkdir(parents=True, exist_ok=True)


def driver_cwd(pack_dir: Path, record: bool = True) -> str:
    """The folder the queue's workers start in (DRIVER_CWD): the first driver's, recorded once (`record`: a
    dry run records nothing)."""
    path = pack_dir / DRIVER_CWD
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if record:
            path.write_text(os.getcwd(), encoding="utf-8")
        return os.getcwd()


def worker_submission(pack_dir: Path, params: Dict[str, Any], record: bool = True) -> Dict[str, Any]:
    """submitit's parameters of the queue's workers: `params` started in the driver's folder (DRIVER_CWD)."""
    extra = {**(params.get("slurm_additional_parameters") or {}), "chdir": driver_cwd(pack_dir, record)}
    return {**params, "slurm_additional_parameters": extra}


def entry_names(count: int) -> List[str]:
    """Names for members queued now: they sort after every earlier one, in the given order."""
    base = time.time_ns()
    return [f"{base:020d}_{i:06d}" for i in range(count)]


def enqueue(pack_dir: Path, names: List[str], run_dirs: List[str]) -> None:
    """Put members at the end of the queue, in order (their records name their entries already)."""
    _dirs(pack_dir)
    (pack_dir / CLOSED).unlink(missing_ok=True)
    for name, run_dir in zip(names, run_dirs):
        tmp = pack_dir / f".{name}"
        tmp.write_text(run_dir, encoding="utf-8")
        os.rename(tmp, pack_dir / "todo" / name)  # appears whole


def is_deferred(content: str) -> bool:
    """An entry whose member is yet to be made (its driver's spec, JSON) rather than a run folder."""
    return content.startswith("{")


def claim(pack_dir: Path, owner: str, name: Optional[str] = None) -> Optional[Tuple[str, str]]:
    """Take `name`, or the first member still queued, for `owner`: (entry name, run folder) or None."""
    todo = pack_dir / "todo"
    for entry in [name] if name else sorted(os.listdir(todo)):
        try:
            os.rename(todo / entry, pack_dir / "claimed" / f"{entry}@{owner}")
        except FileNotFoundError:  # another worker was first
            continue
        return entry, (pack_dir / "claimed" / f"{entry}@{owner}").read_text(encoding="utf-8")
    return None


def end_queued(pack_dir: Path, entries: List[str], owner: str, reason: str, status: str = CANCELED) -> List[str]:
    """Take those of `entries` no worker has taken and end their members (`status`); returns the specs of the
    deferred ones among them, which were never made (mltrain.launch.deferred)."""
    never_made = []
    for entry in entries:
        taken = claim(pack_dir, owner, entry)
        if taken is None:
            continue
        if is_deferred(taken[1]):
            never_made.append(taken[1])
        else:
            record = RunRecord.load(taken[1])
            if record.status not in TERMINAL:
                finish(record, status, reason)
        release(pack_dir, entry, owner)
    return never_made


def release(pack_dir: Path, entry: str, owner: str, again: bool = False) -> None:
    """Done with a member (or, `again`, back at the head of the queue for another worker)."""
    os.rename(pack_dir / "claimed" / f"{entry}@{owner}", pack_dir / ("todo" if again else "done") / entry)


# ---------------------------------------------------------------------------------------- the worker


@dataclass
class PackWorker:
    """What submitit runs in each worker job (pickled by reference to this module)."""

    pack_dir: str
    timeout_min: int
    # members run at once (compute.pack_slots; mltrain.backends.slurm.pack_slots runs more than one)
    slots: int = 1
    _current: Dict[int, Tuple[str, str]] = field(default_factory=dict, repr=False)  # slot -> (entry, owner)
    _maker: Optional[Callable[[Dict[str, Any], str], str]] = field(default=None, repr=False)

    def __call__(self) -> int:
        import submitit  # heavy

        env = submitit.JobEnvironment()
        owner = str(env.job_id)
        pack_dir, started = Path(self.pack_dir), time.monotonic()
        alive = pack_dir / "workers" / f"{owner}.alive"
        stop, stopping = threading.Event(), threading.Event()
        # scancel of this worker (or its node going away): SIGTERM reaches every process of the job; the member
        # under way goes back to the queue for another worker, instead of being recorded Failed by a SIGTERM
        # that was not its own doing (submitit's own handler would only log the signal).
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        alive.write_text(f"{socket.gethostname()} {os.getpid()}", encoding="utf-8")
        threading.Thread(target=_beat, args=(alive, stop), daemon=True).start()
        try:
            if self.slots > 1:
                from mltrain.backends.slurm import pack_slots  # startup

                pack_slots.serve(self, owner, started, stopping)
            else:
                self.serve(owner, started, stopping)
        finally:
            stop.set()
            if alive.exists():
                os.rename(alive, alive.with_suffix(".gone"))
        return 0

    def serve(self, owner: str, started: float, stopping: threading.Event, slot: int = 0,
              env: Optional[Dict[str, str]] = None, running: Optional[Dict[int, SlurmRank]] = None) -> None:
        """Take members one after another until the queue stays empty (or the time limit nears); `slot`, `env`
        and `running` are a GPU slot's (mltrain.backends.slurm.pack_slots)."""
        pack_dir = Path(self.pack_dir)
        longest, idle_since = 0.0, time.monotonic()
        while True:
            # a member is not started unless the worker's time limit leaves room for the longest seen yet
            if stopping.is_set() or time.monotonic() - started + max(longest, 60.0) > self.timeout_min * 60:
                break
            if (pack_dir / STOPPED).exists():  # the sweep was canceled: its canceller empties the queue
                break
            taken = claim(pack_dir, owner)
            if taken is None:
                if time.monotonic() - idle_since > IDLE_S or (pack_dir / CLOSED).exists():
                    break
                time.sleep(0.1)
                continue
            began = time.monotonic()
            self._current[slot] = (taken[0], owner)
            run_dir = self._made(pack_dir, taken[0], owner, taken[1])
            if run_dir is None:
                self._current.pop(slot, None)
                continue
            ended = run_member(Path(run_dir), owner, str(pack_dir / "submitit"), stopping, env, running, slot)
            try:
                release(pack_dir, taken[0], owner, again=ended == QUEUED)
            except FileNotFoundError:  # a GPU slot's member the worker's checkpoint put back in the queue already
                if not stopping.is_set():
                    raise
            self._current.pop(slot, None)
            longest, idle_since = max(longest, time.monotonic() - began), time.monotonic()

    def _made(self, pack_dir: Path, entry: str, owner: str, content: str) -> Optional[str]:
        """The member's run folder. A deferred member (mltrain.launch.deferred) is made now, by the maker its
        driver left in the queue folder, and its claimed entry then names its folder, as an eager member's
        does. None when it could not be made: the reason goes to the queue's DEFERRED_ERRORS and the worker."""
        if not is_deferred(content):
            return content
        try:
            if self._maker is None:
                self._maker = pickle.loads((pack_dir / DEFERRED).read_bytes())
            run_dir = self._maker(json.loads(content), entry)
        except Exception as exc:  # not its config (that ends it Failed in its own folder): the others still run
            line = f"{entry}: {' '.join(str(exc).split()) or type(exc).__name__}\n"
            with open(pack_dir / DEFERRED_ERRORS, "a", encoding="utf-8") as errors:
                errors.write(line)
            print(f"mltrain: a deferred member could not be made: {line}", end="", flush=True)
            release(pack_dir, entry, owner)
            return None
        named = pack_dir / f".{entry}@{owner}"
        named.write_text(run_dir, encoding="utf-8")
        os.replace(named, pack_dir / "claimed" / f"{entry}@{owner}")
        return run_dir

    def checkpoint(self, *args: object, **kwargs: object) -> Any:
        """Preemption or the time limit: the member under way goes back to the queue (its rank program had
        its SIGUSR1, as an unpacked member's has), and the worker is requeued."""
        import submitit  # heavy

        for entry, owner in list(self._current.values()):
            try:
                release(Path(self.pack_dir), entry, owner, again=True)
            except FileNotFoundError:  # a GPU slot has put its member back itself (mltrain.backends.slurm.pack_slots)
                pass
        return submitit.helpers.DelayedSubmission(PackWorker(self.pack_dir, self.timeout_min, self.slots))


def _beat(alive: Path, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        try:
            os.utime(alive)
        except OSError:
            return
