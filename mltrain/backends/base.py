"""The Backend protocol, and what every backend shares.

A backend is built around a Plan: `plan(job)` says what would be started (each rank's command line,
working directory and variables, plus the backend's own submission: an mpirun line, submitit's
parameters and batch script) without starting anything; the dry run prints it and `launch()` starts
exactly that. After launch, the run handle (mltrain.python_api.handle) asks the backend named in the
run's record for its state (`refresh`) and to stop it (`cancel`). Sweeps and pipelines hand their runs
over with `submit`, which returns a Submission at once (mltrain.backends.handover).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from mltrain.backends.handover import Submission, Supervised
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.base.processes import pid_alive
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import ComputeConf
from mltrain.jobspec.status import FAILED, PREPARING, TERMINAL
from mltrain.runs import mlflow_run
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord
from mltrain.runs.waiting import wait_until

#: Stands for a value only the start of the run knows (a port the OS hands out, a node name).
PORT = "<port>"


@dataclass
class Outcome:
    status: str
    error: Optional[str] = None
    failed_rank: Optional[int] = None


@dataclass
class Plan:
    """What a backend starts for one run."""

    job: FrozenJob
    # Per rank: {"rank", "place", "argv", "cwd", "env"} (mltrain.ranks.contract.plan, which types them no closer).
    ranks: List[Dict[str, Any]]
    # How the placeholders in `ranks` get their values, one line each.
    notes: List[str] = field(default_factory=list)
    # The backend's own submission (mpirun argv, submitit parameters, batch script), by name.
    details: Dict[str, Any] = field(default_factory=dict)


class Backend(ABC):
    name: ClassVar[str]
    # Whether environment.docker.base_image runs the ranks in a container here.
    containers: ClassVar[bool] = False
    # How often the run handle's wait() looks again (each look may ask the backend).
    wait_poll_s: ClassVar[float] = 0.1

    # ------------------------------------------------------------------ freezing
    @abstractmethod
    def check(self, cfg: Any) -> Optional[str]:
        """Refuse what this backend cannot run (ConfigError); returns the ranks' process-group
        backend (gloo | nccl), or None for a single process (`process_group` says which, from the GPUs
        each node of the job will have)."""

    def wrap_ranks(self, compute: ComputeConf, environment: Dict[str, Any],
                   run_dir: str) -> Tuple[List[str], Dict[str, str]]:
        """What every rank of a job runs under on this backend: a command prefix (a container runtime) and
        variables (a device mask)."""
        return [], {}

    def validate(self, job: FrozenJob) -> None:  # noqa: B027 - an optional hook: most backends need none
        """Refuse a frozen job this backend would only fail on at submission (ConfigError)."""

    def preflight(self, jobs: Sequence[FrozenJob] = ()) -> None:  # noqa: B027 - an optional hook
        """Refuse a real submission this machine cannot make (ConfigError), before any run folder
        exists; a dry run does not call it, so it still shows the submission where nothing could run.
        `jobs`: the runs about to be submitted together (a sweep's members), where the caller has them."""

    # ------------------------------------------------------------------ submission
    @abstractmethod
    def plan(self, job: FrozenJob, share: int = 1) -> Plan:
        """What would be started; starts nothing, creates nothing. `share` is how many runs will run
        side by side on the same machine (a local sweep), so each gets its part of the cores."""

    def describe(self, plan: Plan) -> List[str]:
        """The backend's own lines of the dry run (rank lines are common to all)."""
        return list(plan.notes)

    @abstractmethod
    def launch(self, plans: List[Plan], records: List[RunRecord], consoles: List[Console],
               cancel: threading.Event) -> List[str]:
        """Start every run and follow it to its final status (or, detached, until it is queued).
        Never raises for a failing run: the returned statuses say it."""

    def submit(self, plan: Plan, record: RunRecord, console: Console) -> Submission:
        """Hand one run over and return at once; the Submission says how it goes and cancels it. The run is
        driven by this process (launch(), in a thread of its own) until it ends."""
        return Supervised(self, plan, record, console)

    # ------------------------------------------------------------------ the run handle's view
    @abstractmethod
    def refresh(self, records: List[RunRecord]) -> None:
        """Bring runs that have not ended up to date with what this backend knows of them."""

    @abstractmethod
    def cancel(self, record: RunRecord) -> None:
        """Stop every rank of a run that has not ended; it ends Canceled."""

    def take_back(self, record: RunRecord) -> bool:
        """A run this backend holds queued and nothing has started, whose driver is gone: taken out of the
        backend's hands (True) for a resuming driver to submit it again; False when it may be under way or
        will start on its own (then it is followed)."""
        return False

    def fetch(self, record: RunRecord, path: str) -> List[str]:
        """Bring `path` of the run's folder (a file or a folder) here from where the run ran, when that is not
        this machine; returns the files it brought (none: the run's folder is here already)."""
        return []

    def locate(self, record: RunRecord) -> Optional[str]:
        """Where the run is in the scheduler's own terms ("Slurm job 12"), for `runs show`; None when
        the run is only processes of this machine."""
        return None

    # ------------------------------------------------------------------ many runs: sweeps and pipelines
    #: Whether a run can be queued now and held by the scheduler until other runs have completed, so a
    #: whole pipeline is queued at once and needs no driver to start its steps.
    holds_dependencies: ClassVar[bool] = False

    def after(self, job: FrozenJob, parents: List[RunRecord]) -> FrozenJob:
        """`job`, to be held by the scheduler until each of `parents` has completed (and dropped if one
        fails). Only for backends that hold dependencies."""
        raise MltrainError(f"the {self.name} backend cannot hold a run until others have completed")

    def concurrency(self, compute: Any) -> Optional[int]:
        """How many members of a sweep this backend runs at once, from the compute settings (None: as
        many as there are)."""
        return None


def process_group(cfg: Any, gpus: int, no_gpus_reason: str) -> Optional[str]:
    """The ranks' process-group backend (gloo | nccl; None for a single process) for a job whose nodes each
    have `gpus` GPUs: `auto` is nccl with GPUs, and nccl without any is refused."""
    dist = cfg.distribution
    if dist.kind == "none":
        return None
    backend = str(dist.backend)
    if backend == "auto":
        backend = "nccl" if gpus > 0 else "gloo"
    if backend == "nccl" and gpus == 0:
        raise ConfigError("distribution.backend", f"nccl needs GPUs and {no_gpus_reason}", ("gloo", "auto"))
    return backend


def prepare_environment(job: FrozenJob, record: RunRecord, log: RunLog,
                        cancel: Optional[threading.Event] = None) -> Optional[threading.Thread]:
    """Build or reuse the run's environment (Preparing); a thread records the exact packages that run.
    `cancel` set stops a build under way (materialize.BuildStopped)."""
    record.set_status(PREPARING)
    log.info(PREPARING, show=True)
    if not job.environment:
        return None
    from mltrain.environments import materialize  # startup
    from mltrain.environments.spec import EnvironmentSpec  # startup

    spec = EnvironmentSpec(**job.environment["spec"])
    info = materialize.materialize(spec, job.environment["containerized"], job.environment.get("check", "error"),
                                   lambda text: log.info(text, show=True), cancel)
    built = info.get("materialized") in ("built", "reused")
    if built and mlflow_run.hook_environment(Path(info["interpreter"]).parents[1]):
        info["mlflow"] = "its own MLflow logs to the run's file store (mlruns)"
    record.update(environment=info)
    if not job.environment["containerized"]:
        # Listing the interpreter's packages takes a moment: it overlaps with the ranks' start.
        def listing() -> None:
            packages = materialize.record_packages(info["interpreter"])
            try:
                record.update(environment={**record.doc.environment, "packages": packages})
            except MltrainError:  # run.json cannot be written (a full disk): the run's own end says so, once
                pass

        thread = threading.Thread(target=listing, daemon=True)
        thread.start()
        return thread
    return None


def failure_text(exc: BaseException) -> str:
    """What a run's error says when starting it raised: a user's problem as it is, anything else
    as mltrain's own fault."""
    if isinstance(exc, MltrainError):
        return str(exc)
    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        return f"{exc.strerror}: {exc.filename}"
    return f"internal error in mltrain: {type(exc).__name__}: {exc}"


def with_port(argv: List[str], env: Dict[str, str], port: int) -> Tuple[List[str], Dict[str, str]]:
    """(argv, env) with the rendezvous port the start was handed in place of PORT."""
    return [a.replace(PORT, str(port)) for a in argv], {k: v.replace(PORT, str(port)) for k, v in env.items()}


def bind(ranks: List[Dict[str, Any]], port: int) -> List[Dict[str, Any]]:
    """The plan's rank specs with the rendezvous port the start was handed."""
    out: List[Dict[str, Any]] = []
    for spec in ranks:
        argv, env = with_port(spec["argv"], spec["env"], port)
        out.append({**spec, "env": env, "argv": argv})
    return out


def driver_alive(record: RunRecord) -> bool:
    """Whether the `mltrain` process that started the run still runs (on this machine)."""
    pid = record.doc.driver_pid
    if not pid or not record.host_is_here():
        return False
    return pid_alive(int(pid))


def lose_orphan(record: RunRecord, when: str, still: Callable[[RunRecord], bool] = lambda _: True) -> None:
    """A run whose driver died on this machine without recording its end, where nothing else will end it:
    Failed, "driver lost: the mltrain driver (pid N) exited `when`", so that `runs resume` runs it again.
    `still`: whether it is still such a run once read again (the driver may have moved it on meanwhile)."""
    pid = record.doc.driver_pid
    if record.status in TERMINAL or not pid or not record.host_is_here() or driver_alive(record):
        return
    record.reload()
    if record.status not in TERMINAL and still(record):
        finish(record, FAILED, error=f"driver lost: the mltrain driver (pid {pid}) exited {when}")


def earlier_ranks_gone(record: RunRecord) -> None:
    """A local run's ranks end after their driver's death, when its guard has stopped them (SIGTERM, then SIGKILL
    after `kill_grace_s`): a resume started in that instant would run beside them, in the same folder, both
    writing its checkpoints. Wait for them, a little longer than the guard takes; refuse if they stay."""
    if record.doc.backend != "local" or not record.host_is_here():
        return
    pids = [int(rank.pid) for rank in record.doc.ranks.values() if rank.pid]
    if not wait_until(lambda: not any(pid_alive(pid) for pid in pids), float(record.doc.kill_grace_s or 5.0) + 5.0):
        alive = ", ".join(str(pid) for pid in pids if pid_alive(pid))
        raise MltrainError(f"run {record.id}: its earlier ranks still run (pids {alive}); "
                           "stop them first (kill them) and resume again")


def stop_driver(record: RunRecord) -> bool:
    """Ask a run's driver to cancel it (SIGTERM: it stops the ranks and records Canceled) and wait until
    the record says it ended. False when no driver was there to ask."""
    pid = record.doc.driver_pid
    if pid is None or not driver_alive(record):
        return False
    try:
        os.kill(int(pid), signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + 15.0 + float(record.doc.kill_grace_s or 5.0)
    while time.monotonic() < deadline:
        record.reload()
        if record.status in TERMINAL:
            break
        time.sleep(0.05)
    return True
