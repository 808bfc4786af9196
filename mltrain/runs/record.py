"""Run directories and run.json: the record of one run, readable while it runs and after.

Layout of <root>/<run_id>/:
  config.yaml    the frozen, resolved config (what every rank reads)
  job.json       the frozen job (rank program, world layout)
  run.json       status, phase timestamps, world, per-rank exit codes, error
  logs/          launcher.log and one rank_<N>.log per rank
  outputs/       what the job writes there is the run's result
  checkpoints/
  metrics.jsonl  append-only, one JSON object per line

Every write goes to a temporary name and is renamed into place, so a reader never sees half a file.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

import yaml

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.jobspec.records import RankEntry, RunDoc, SweepRef, World
from mltrain.jobspec.status import NOT_STARTED, ORDER, RUNNING, TERMINAL
from mltrain.runs import index

if TYPE_CHECKING:
    from mltrain.jobspec.job import FrozenJob

#: PyYAML's C (libyaml) dumper and loader where it was built with them, its pure-Python ones otherwise.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: Names a file where this process lists each run folder it makes: set for a sweep's or pipeline's driver sent to
#: a remote cluster (mltrain.backends.remote.far_side), so the laptop that sent it finds and mirrors its runs.
RUNS_MADE_ENV = "MLTRAIN_RUNS_MADE"


def note_made(run_dir: Path) -> None:
    listing = os.environ.get(RUNS_MADE_ENV)
    if listing:
        fd = os.open(listing, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, f"{run_dir}\n".encode())  # one write in append mode: lines of two processes never mix
        finally:
            os.close(fd)


class RunRecord:
    """run.json of one run (its fields: mltrain.jobspec.records.RunDoc); updates are serialised (supervisor
    and reader threads both write)."""

    def __init__(self, run_dir: str | Path, doc: RunDoc):
        self.dir = Path(run_dir)
        self.doc = doc
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ creation and loading
    @classmethod
    def create(cls, job: FrozenJob) -> RunRecord:
        run_dir = Path(job.run_dir)
        run_dir.mkdir(parents=True, exist_ok=False)  # a run directory is never reused
        note_made(run_dir)
        try:
            for sub in ("logs", "outputs", "checkpoints"):
                (run_dir / sub).mkdir()
            (run_dir / "metrics.jsonl").touch()
            # libyaml's dumper when PyYAML has it: the same YAML, written several times faster (a sweep writes one per member)
            atomic_write(run_dir / "config.yaml", yaml.dump(job.config, Dumper=_DUMPER, sort_keys=False))
            atomic_write(run_dir / "job.json", json.dumps(job.to_json(), indent=2))
            now = time.time()
            record = cls(run_dir, RunDoc(
                id=job.run_id, experiment=job.experiment, status=NOT_STARTED, created=now, phases={NOT_STARTED: now},
                host=socket.gethostname(), driver_pid=os.getpid(), backend=job.backend, compute=job.compute.kind,
                distribution=job.distribution.kind, process_group=job.process_group,
                world=World(job.node_count, job.process_count_per_node, job.world_size), command=job.argv,
                kill_grace_s=job.kill_grace_s, cwd=job.cwd, overrides=job.overrides,
                sweep=SweepRef(job.sweep_dir, job.sweep_index)))
            record._set_aside()
            record.save()
        except BaseException:  # never made (a full disk): no half-made folder is left to block the same run.id
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        return record

    @classmethod
    def load(cls, run_dir: str | Path) -> RunRecord:
        path = Path(run_dir) / "run.json"
        try:
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
        except FileNotFoundError:
            raise MltrainError(f"no run record at {path}") from None
        except ValueError as exc:
            raise MltrainError(f"{path} is unreadable ({exc}); the run's logs are in {Path(run_dir) / 'logs'}") from None
        try:
            return cls(run_dir, RunDoc.from_json(raw))
        except MltrainError as exc:
            raise MltrainError(f"{path}: {exc}") from None

    # ------------------------------------------------------------------ updates
    RESERVE_FILE = ".run.json.reserve"
    RESERVE_BYTES = 64 * 1024

    def save(self) -> None:
        """run.json by a temporary name and a rename: a failed write leaves the previous record whole. On a
        full device, the room set aside when the run was made (RESERVE_FILE) is given up once, so that
        the run's end can still be recorded; after that, one line naming the file and the space."""
        text = json.dumps(self.doc.to_json(), indent=2, sort_keys=True)
        try:
            written = atomic_write(self.dir / "run.json", text)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
            reserve = self.dir / self.RESERVE_FILE
            if reserve.exists():
                reserve.unlink()
                return self.save()
            free = shutil.disk_usage(self.dir).free
            raise MltrainError(f"no space left on device writing {self.dir / 'run.json'} ({free} bytes free); the "
                               f"previous record is kept") from None
        index.note(self.dir, self.doc, written)

    def _set_aside(self) -> None:
        """The room save() falls back on when the device fills while the run runs."""
        try:
            with open(self.dir / self.RESERVE_FILE, "wb") as f:
                f.write(b"\0" * self.RESERVE_BYTES)
        except OSError:  # no room even now: the run starts without the reserve
            (self.dir / self.RESERVE_FILE).unlink(missing_ok=True)

    def resolved_config(self) -> Dict[str, Any]:
        """config.yaml, the frozen and resolved config the run was made with ({} when it has none: a member
        never made). Read with libyaml's loader when PyYAML has it, as it was written: PyYAML's own loader
        took 6 ms a run, half of what the MLflow mirror spent on each member of a sweep."""
        path = self.dir / "config.yaml"
        if not path.is_file():
            return {}
        return yaml.load(path.read_text(), Loader=_LOADER) or {}

    def update(self, **fields: object) -> None:
        with self._lock:
            self.doc.set(**fields)
            self.save()

    def update_on_disk(self, **fields: object) -> None:
        """Set `fields` on run.json as it is now: for a process that does not drive the run (the MLflow
        mirror), whose copy may be seconds old. update() writes this process's copy whole, which would
        put back a status the run's driver or a look has moved on from since."""
        with self._lock:
            try:
                self.doc = RunRecord.load(self.dir).doc
            except MltrainError:  # unreadable now: this process's copy is the best there is
                pass
            self.doc.set(**fields)
            self.save()

    def set_status(self, status: str, at: Optional[float] = None, **fields: object) -> None:
        """Enter `status`; `at` is when the backend says it happened (Slurm's accounting), else now.
        The first time of each phase is kept (a requeued job is Queued and Running again)."""
        with self._lock:
            self.doc.status = status
            self.doc.phases.setdefault(status, at if at is not None else time.time())
            self.doc.set(**fields)
            self.save()
            if status in TERMINAL:  # nothing more to record: the room kept for it is given back
                (self.dir / self.RESERVE_FILE).unlink(missing_ok=True)

    def reopen(self) -> None:
        """Start another attempt of this run in the same directory; earlier attempts stay in `attempts`."""
        with self._lock:
            d = self.doc
            d.attempts.append({"status": d.status, "phases": d.phases, "ranks": {r: e.to_json() for r, e in d.ranks.items()},
                               "error": d.error})
            d.set(status=NOT_STARTED, phases={NOT_STARTED: time.time()}, ranks={}, error=None, failed_rank=None,
                  driver_pid=os.getpid(), outputs=[])
            if not (self.dir / self.RESERVE_FILE).exists():  # given up by the attempt that filled the device
                self._set_aside()
            # the earlier attempt's cancel was carried out: left here, it would cancel the new attempt at its start
            # (a packed member run again by `runs resume` of a Ctrl-C'd sweep ended Canceled in 0.0 s: chaos seed 111)
            (self.dir / self.CANCEL_FILE).unlink(missing_ok=True)
            self.save()

    def set_rank(self, rank: int, **fields: object) -> None:
        with self._lock:
            entry = self.doc.ranks.setdefault(str(rank), RankEntry())
            for key, value in fields.items():
                if not hasattr(entry, key):
                    raise AttributeError(f"rank entries have no field {key!r}")
                setattr(entry, key, value)
            self.save()

    def reload(self) -> None:
        """Read run.json again (another process, the driver or a rank, may have written it)."""
        fresh = RunRecord.load(self.dir)
        with self._lock:
            self.doc = fresh.doc

    # ------------------------------------------------------------------ a cancel asked from another process
    CANCEL_FILE = "cancel_requested"

    def request_cancel(self, reason: str) -> None:
        """Ask the run's driver, from another process, to cancel a run it has not submitted yet. A file
        beside run.json, not a field in it: the driver writes run.json whole from what it holds, so a
        field written by another process would be lost at its next update."""
        atomic_write(self.dir / self.CANCEL_FILE, reason)

    def cancel_requested(self) -> Optional[str]:
        """Why another process asked for a cancel (request_cancel), or None."""
        try:
            return (self.dir / self.CANCEL_FILE).read_text(encoding="utf-8") or "canceled by the user"
        except FileNotFoundError:
            return None

    # ------------------------------------------------------------------ reading
    def host_is_here(self) -> bool:
        """Whether the run's driver ran on this machine (only then can its pid be looked at)."""
        return self.doc.host in (None, socket.gethostname())

    @property
    def id(self) -> str:
        return self.doc.id

    @property
    def status(self) -> str:
        return self.doc.status

    @property
    def backend(self) -> str:
        """The backend named at freezing ("pipeline" for a pipeline's own run; the process group in 0.1.0)."""
        return self.doc.backend

    @property
    def compute_kind(self) -> str:
        return self.doc.compute

    @property
    def distribution_kind(self) -> str:
        return self.doc.distribution

    @property
    def is_pipeline(self) -> bool:
        return self.doc.pipeline is not None

    @property
    def scheduler_job_id(self) -> Optional[str]:
        """The scheduler's id of the run's job, once it was submitted to one (a backend that queues runs on a
        scheduler writes it as `job_id` in its part of the record)."""
        ids = [part["job_id"] for part in self.doc.backend_parts.values() if part.get("job_id") is not None]
        return str(ids[0]) if ids else None

    @property
    def error(self) -> Optional[str]:
        return self.doc.error

    @property
    def world_size(self) -> int:
        return self.doc.world.world_size

    @property
    def ended_at(self) -> float:
        return self.doc.ended_at

    def log_path(self, rank: Optional[int] = None) -> Path:
        return self.dir / "logs" / ("launcher.log" if rank is None else f"rank_{rank}.log")

    @property
    def created(self) -> float:
        """When the run (or its current attempt) was created; records of 0.1.0 start at Queued."""
        return self.doc.created

    def times(self) -> Tuple[float, float]:
        """(seconds it ran, seconds it waited before running) once it has ended."""
        phases = self.doc.phases
        end = max(phases.values())
        start = phases.get(RUNNING, end)
        return end - start, start - min(phases.values())

    def phase_order(self) -> List[str]:
        """The phases in the order they happened (equal times in lifecycle order)."""
        phases = self.doc.phases
        rank = {name: i for i, name in enumerate(ORDER)}
        return sorted(phases, key=lambda name: (phases[name], rank.get(name, len(ORDER))))

    def durations(self) -> Dict[str, float]:
        """Seconds spent in each phase: where the time went."""
        phases = [(name, self.doc.phases[name]) for name in self.phase_order()]
        out: Dict[str, float] = {}
        for (name, start), (_, end) in zip(phases, phases[1:]):
            out[name] = end - start
        return out

    def to_json(self) -> Dict[str, Any]:
        """run.json as written (`runs show --json`)."""
        return self.doc.to_json()


def iter_runs(root: Path, unreadable: Optional[List[Path]] = None) -> Iterator[RunRecord]:
    """Every run under root; folders whose run.json cannot be read go to `unreadable` when given."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if (entry / "run.json").is_file():
            try:
                yield RunRecord.load(entry)
            except MltrainError:
                if unreadable is not None:
                    unreadable.append(entry)


def find_run(root: Path, ref: str) -> RunRecord:
    """A run by directory path, full id, or unique id prefix."""
    path = Path(ref).expanduser()
    if (path / "run.json").is_file():
        return RunRecord.load(path)
    if (root / ref / "run.json").is_file():
        return RunRecord.load(root / ref)
    prefix = root.is_dir() and not path.is_absolute()  # an absolute path is a folder or nothing (glob refuses it)
    matches: List[Path] = sorted(p for p in root.glob(f"{ref}*") if (p / "run.json").is_file()) if prefix else []
    if len(matches) == 1:
        return RunRecord.load(matches[0])
    if len(matches) > 1:
        raise MltrainError(f"run '{ref}' is ambiguous: {', '.join(p.name for p in matches[:5])} ...")
    unmade = _unmade_member(root, ref) if prefix else None
    if unmade is not None:
        raise MltrainError(unmade)
    raise MltrainError(f"no run '{ref}' under {root} (see `mltrain runs list`)")


def _unmade_member(root: Path, run_id: str) -> Optional[str]:
    """What to say of a sweep member whose run folder does not exist (yet): a detached packed sweep's member
    is made by the worker that takes it (mltrain.launch.deferred), and the sweep's summary.json names it."""
    needle = f'"{run_id}"'
    for summary in sorted((root / "_sweeps").glob("*/summary.json")):
        try:
            text = summary.read_text(encoding="utf-8")
            rows = json.loads(text) if needle in text else []
        except (OSError, ValueError):
            continue
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict) and row.get("run_id") == run_id:
                sweep = summary.parent.name
                if row.get("status") in TERMINAL:
                    return f"run '{run_id}' of sweep {sweep} ended {row['status']} before a worker made it"
                return (f"run '{run_id}' of sweep {sweep} is queued: its run folder is made when a worker starts it "
                        f"(`mltrain runs cancel {sweep}` cancels the sweep's members)")
    return None
