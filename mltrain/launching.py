"""The launch path shared by `mltrain` and `mltrain -m`: compose (mltrain.compose) -> freeze ->
validate -> prepare -> fan out ranks -> monitor -> finalize, for every member of a sweep.

Called by the Hydra launcher plugin (launchers/hydra_plugins/mltrain_launcher), which stays thin.
Every member is composed, validated and frozen before the first one starts, so a bad value in the
third member of a sweep stops the sweep before anything runs.
"""
from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from mltrain import frozen as freezing
from mltrain.console import Console, RunLog
from mltrain.errors import RunCanceled, RunFailed
from mltrain.frozen import FrozenJob
from mltrain.records import CANCELED, COMPLETED, FAILED, FINALIZING, PREPARING, QUEUED, RUNNING, RunRecord, atomic_write
from mltrain.supervisor import LocalSupervisor, Outcome


@dataclass
class RunResult:
    job: FrozenJob
    status: str
    error: Optional[str] = None

    @property
    def run_dir(self) -> str:
        return self.job.run_dir


def freeze_members(configs: List[DictConfig], runs_root: str, app_compute: Optional[dict] = None) -> List[FrozenJob]:
    from hydra.core.hydra_config import HydraConfig

    jobs = []
    for cfg in configs:
        HydraConfig.instance().set_config(cfg)
        jobs.append(freezing.freeze(cfg, runs_root, sweep_index=int(cfg.hydra.job.num), app_compute=app_compute))
    return jobs


# ----------------------------------------------------------------------------------- execution


def execute(job: FrozenJob, cancel: threading.Event, console: Console, payload: Optional[bytes] = None,
            record: Optional[RunRecord] = None) -> RunResult:
    """Run one frozen job to a final status. Never raises for a failing job: the status says it.

    With `record`, an already submitted run (or a resumed or requeued one) runs in its own directory.
    """
    record = record or submit(job, console, payload)
    log = RunLog(record.log_path(), console)
    log.info(f"overrides: {' '.join(job.overrides) or '(none)'}")
    record.set_status(PREPARING)
    log.info(PREPARING, show=True)
    outcome: Outcome
    listing: Optional[threading.Thread] = None
    try:
        listing = prepare_environment(job, record, log)
        if cancel.is_set():
            outcome = Outcome(CANCELED, error="canceled before start")
        else:
            record.set_status(RUNNING)
            layout = f"{job.world_size} rank(s)" + (f", {job.backend}" if job.backend else "")
            log.info(f"{RUNNING} ({layout}, {job.compute})", show=True)
            if job.distribution == "mpi":
                from mltrain.mpi import MpiSupervisor

                outcome = MpiSupervisor(job, record, log, console, cancel).run()
            else:
                outcome = LocalSupervisor(job, record, log, console, cancel).run()
    except Exception as exc:  # a launcher bug or an OS error must still leave a final status
        outcome = Outcome(FAILED, error=f"launcher error: {type(exc).__name__}: {exc}")
    record.set_status(FINALIZING)
    log.info(FINALIZING, show=True)
    if listing is not None:
        listing.join(timeout=60)
    record.update(outputs=_outputs_manifest(record.dir / "outputs"))
    record.set_status(outcome.status, error=outcome.error, failed_rank=outcome.failed_rank)
    elapsed = record.data["phases"][outcome.status] - record.data["phases"]["Queued"]
    log.info(f"{outcome.status} in {elapsed:.1f}s  {job.run_dir}", show=True)
    if outcome.error and outcome.status == FAILED:
        console.status(outcome.error)
    return RunResult(job, outcome.status, outcome.error)


def prepare_environment(job: FrozenJob, record: RunRecord, log: RunLog) -> Optional[threading.Thread]:
    """Build or reuse the run's environment (Preparing); a thread records the exact packages that run."""
    if not job.environment:
        return None
    from mltrain.environments import materialize
    from mltrain.environments.spec import EnvironmentSpec

    spec = EnvironmentSpec(**job.environment["spec"])
    info = materialize.materialize(spec, job.environment["containerized"], job.environment.get("check", "error"),
                                   lambda text: log.info(text, show=True))
    record.update(environment=info)
    if not job.environment["containerized"]:
        # Listing the interpreter's packages takes a moment: it overlaps with the ranks' start.
        def listing() -> None:
            packages = materialize.record_packages(info["interpreter"])
            record.update(environment={**record.data["environment"], "packages": packages})

        thread = threading.Thread(target=listing, daemon=True)
        thread.start()
        return thread
    return None


def _outputs_manifest(outputs: Path) -> List[dict]:
    """What the run produced: the outputs/ files with their sizes (Finalizing collects them)."""
    files = []
    for path in sorted(outputs.rglob("*")):
        if path.is_file():
            files.append({"path": str(path.relative_to(outputs)), "bytes": path.stat().st_size})
    return files


class _CancelOnSignal:
    """SIGINT/SIGTERM on the driver cancel every run in flight instead of killing the driver."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.signum: Optional[int] = None
        self._old: dict = {}

    def __enter__(self) -> "_CancelOnSignal":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        self.signum = signum
        self.cancel.set()

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def submit(job: FrozenJob, console: Console, payload: Optional[bytes] = None) -> RunRecord:
    """Queue one run: its directory, its frozen config and, for script jobs, the source snapshot.

    Done for every member of a sweep before the first one starts, so editing the source while a
    run is queued changes nothing.
    """
    from mltrain import snapshot

    record = RunRecord.create(job)
    console.status(f"run {job.run_id}  {job.run_dir}")
    if payload is not None:  # a plain Hydra app's pickled task function, read by its ranks
        (record.dir / "task.pkl").write_bytes(payload)
    if job.snapshot_source:
        info = snapshot.take(job.snapshot_source, job.cwd)
        snapshot.link_run_folders(Path(job.cwd), record.dir)
        record.update(snapshot=info.to_json())
        RunLog(record.log_path(), console).info(
            f"snapshot of {info.source}: {info.files} files, {info.bytes / 1024:.0f} KB, sha256 {info.hash[:12]}, "
            f"{info.seconds:.2f}s" + (f" (ignore rules: {', '.join(info.ignore_files)})" if info.ignore_files else ""))
        if info.warning:
            console.status(f"warning: {info.warning}")
    return record


def execute_all(jobs: List[FrozenJob], payloads: Optional[List[bytes]] = None) -> List[RunResult]:
    cancel = threading.Event()
    parallel = max(1, min(jobs[0].max_concurrent_jobs, len(jobs)))
    payloads = payloads or [None] * len(jobs)  # type: ignore[list-item]
    sweep = len(jobs) > 1
    consoles = [Console(prefix=f"[#{job.sweep_index}] " if (parallel > 1 or (sweep and job.compute == "slurm")) else "")
                for job in jobs]
    records = [submit(job, console, p) for job, console, p in zip(jobs, consoles, payloads)]
    with _CancelOnSignal(cancel) as guard:
        if jobs[0].compute == "slurm":
            results = _execute_slurm(jobs, records, consoles, cancel)
        elif parallel == 1:
            results = [execute(job, cancel, c, record=r) for job, c, r in zip(jobs, consoles, records)]
        else:
            with ThreadPoolExecutor(parallel) as pool:
                futures = [pool.submit(execute, job, cancel, c, None, r) for job, c, r in zip(jobs, consoles, records)]
                while not all(f.done() for f in futures):
                    time.sleep(0.05)  # keep the main thread free to take signals
                results = [f.result() for f in futures]
    if guard.signum is not None:
        for r in results:
            if r.status not in (COMPLETED, FAILED, CANCELED):
                r.status = CANCELED
    return results


def _execute_slurm(jobs: List[FrozenJob], records: List[RunRecord], consoles: List[Console],
                   cancel: threading.Event) -> List[RunResult]:
    from mltrain import slurm

    submitted = slurm.submit(jobs, records, consoles[0])
    if jobs[0].detach:
        for job, sjob, console in zip(jobs, submitted, consoles):
            console.status(f"detached: run {job.run_id} is Slurm job {sjob.job_id}; follow it with "
                           f"`mltrain runs status|logs|cancel {job.run_id}`")
        return [RunResult(job, QUEUED) for job in jobs]
    statuses = slurm.wait(jobs, records, submitted, consoles, cancel)
    return [RunResult(job, status, record.data.get("error")) for job, status, record in zip(jobs, statuses, records)]


def resume(record: RunRecord, detach: bool = False) -> RunResult:
    """Run a stopped run again from its frozen job, on the compute it was frozen for; built-in
    components continue from their checkpoint."""
    from mltrain.errors import MltrainError

    if record.status not in (FAILED, CANCELED):
        raise MltrainError(f"run {record.id} is {record.status}; only Failed or Canceled runs can be resumed")
    import dataclasses

    # Whether to wait is this command's choice, not the one frozen with the first submission.
    job = dataclasses.replace(FrozenJob.load(record.dir), detach=detach)
    record.reopen()
    cancel = threading.Event()
    console = Console()
    with _CancelOnSignal(cancel):
        if job.compute == "slurm":
            return _execute_slurm([job], [record], [console], cancel)[0]
        return execute(job, cancel, console, record=record)


def write_sweep_summary(results: List[RunResult]) -> None:
    import json

    sweep_dir = results[0].job.sweep_dir
    if not sweep_dir:
        return
    Path(sweep_dir).mkdir(parents=True, exist_ok=True)
    rows = [{"index": r.job.sweep_index, "run_id": r.job.run_id, "status": r.status, "run_dir": r.run_dir,
             "overrides": r.job.overrides} for r in results]
    atomic_write(Path(sweep_dir) / "summary.json", json.dumps(rows, indent=2))


def print_summary(results: List[RunResult], console: Console) -> None:
    if len(results) < 2:
        return
    console.status(f"sweep of {len(results)} runs:")
    for r in results:
        console.write_line(f"  #{r.job.sweep_index} {r.status:<9} {' '.join(r.job.overrides):<40} {r.run_dir}")


def job_return(cfg: DictConfig, result: RunResult):
    from hydra.core.utils import JobReturn, JobStatus

    ret = JobReturn(
        overrides=list(result.job.overrides),
        # The frozen, resolved config as plain data: copying each member's DictConfig again would
        # cost more than everything else a 100-member sweep does.
        cfg=result.job.config,
        hydra_cfg=cfg,
        working_dir=result.run_dir,
        task_name=str(cfg.hydra.job.name),
    )
    if result.status in (COMPLETED, QUEUED):  # QUEUED: detached, still on the cluster
        ret.status = JobStatus.COMPLETED
        ret.return_value = {"run_id": result.job.run_id, "run_dir": result.run_dir, "status": result.status}
    else:
        ret.status = JobStatus.FAILED
        error = RunCanceled if result.status == CANCELED else RunFailed
        ret.return_value = error(f"run {result.job.run_id} {result.status}: {result.error or ''}".strip())
    return ret


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """The body of MltrainLauncher.launch()."""
    from hydra.core.utils import setup_globals

    setup_globals()
    from mltrain.compose import compose_members

    configs = compose_members(launcher, job_overrides, initial_job_idx)
    runs_root = str(launcher.params.get("runs_root") or "~/.mltrain/runs")
    app_compute = launcher.params.get("compute")
    if isinstance(app_compute, DictConfig):
        app_compute = OmegaConf.to_container(app_compute, resolve=True)
    jobs = freeze_members(configs, runs_root, dict(app_compute) if app_compute else None)
    if any(freezing.is_mltrain_config(c) and c.dry_run for c in configs):
        from mltrain.dryrun import dry_run_text

        console = Console()
        for job in jobs:
            console.write_line(dry_run_text(job))
        return [job_return(c, RunResult(j, COMPLETED)) for c, j in zip(configs, jobs)]
    if not freezing.is_mltrain_config(configs[0]):
        from mltrain.hydra_task import run_hydra_tasks

        return run_hydra_tasks(launcher, configs, jobs)
    results = execute_all(jobs)
    write_sweep_summary(results)
    print_summary(results, Console())
    # Raised here rather than left in a FAILED JobReturn: every member has run and the summary is
    # printed, and Hydra's sweeper would otherwise add its own multi-line report.
    for error in (RunCanceled, RunFailed):
        status = CANCELED if error is RunCanceled else FAILED
        bad = [r for r in results if r.status == status]
        if bad:
            raise error(f"{len(bad)} of {len(results)} run(s) {status}: " + ", ".join(r.job.run_id for r in bad))
    return [job_return(c, r) for c, r in zip(configs, results)]
