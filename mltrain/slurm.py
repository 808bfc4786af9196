"""The Slurm backend, on submitit: one mltrain run = one Slurm job of node_count nodes x
process_count_per_node tasks (one rank per task); a sweep = one job array.

Building the submission (executor parameters, the sbatch script) is separate from submitting it, so
the dry run prints exactly what would be submitted. While it waits, the driver maps Slurm's job
states to run statuses, prints their changes and streams rank 0's log; `mltrain runs status|cancel`
do the same later for a detached run.
"""
from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from mltrain.console import Console, RunLog
from mltrain.errors import ConfigError
from mltrain.frozen import FrozenJob
from mltrain.records import CANCELED, COMPLETED, FAILED, FINALIZING, PREPARING, QUEUED, RUNNING, TERMINAL, RunRecord
from mltrain.supervisor import follow

# Slurm job state -> run status (sacct names; submitit reports them as they are).
STATES = {
    "PENDING": QUEUED, "REQUEUED": QUEUED, "REQUEUE_HOLD": QUEUED, "REQUEUE_FED": QUEUED, "SUSPENDED": QUEUED,
    "CONFIGURING": QUEUED, "RUNNING": RUNNING, "COMPLETING": RUNNING, "COMPLETED": COMPLETED,
    "CANCELLED": CANCELED, "FAILED": FAILED, "TIMEOUT": FAILED, "NODE_FAIL": FAILED, "OUT_OF_MEMORY": FAILED,
    "PREEMPTED": QUEUED, "BOOT_FAIL": FAILED, "DEADLINE": FAILED,
}


def executor_parameters(job: FrozenJob) -> Dict[str, Any]:
    """submitit AutoExecutor parameters for one run (array parallelism is set by the caller)."""
    c = job.compute_params
    params: Dict[str, Any] = {
        "nodes": job.node_count,
        "tasks_per_node": job.process_count_per_node,
        "cpus_per_task": c.get("cpus_per_task", 1),
        "timeout_min": c.get("timeout_min", 60),
        "name": job.experiment,
        "slurm_signal_delay_s": c.get("signal_delay_s", 90),
        # A rank exiting non-zero ends the whole step, so the job is FAILED (hydra #1928).
        "slurm_srun_args": ["--kill-on-bad-exit=1", *c.get("srun_args", [])],
    }
    if c.get("gpus_per_node"):
        params["gpus_per_node"] = c["gpus_per_node"]
    if c.get("mem_gb") is not None:
        params["mem_gb"] = c["mem_gb"]
    for key, name in (("partition", "slurm_partition"), ("account", "slurm_account"), ("qos", "slurm_qos"),
                      ("constraint", "slurm_constraint")):
        if c.get(key):
            params[name] = c[key]
    if c.get("additional_parameters"):
        params["slurm_additional_parameters"] = dict(c["additional_parameters"])
    environment = job.environment or {}
    if environment.get("containerized") and c.get("container_runtime", "pyxis") == "pyxis":
        from mltrain.configpath import mltrain_home

        mounts = ",".join(f"{p}:{p}" for p in sorted({str(Path(job.run_dir).parent), str(mltrain_home())}))
        params["slurm_srun_args"] += [f"--container-image={environment['spec']['base_image']}",
                                      f"--container-mounts={mounts}"]
    if job.distribution == "mpi":
        # srun starts the MPI ranks itself through the cluster's PMI plugin: no mpirun in the allocation
        params["slurm_srun_args"].append(f"--mpi={job.config['distribution'].get('slurm_mpi', 'pmix')}")
    setup = list((environment.get("spec") or {}).get("setup") or job.config.get("environment", {}).get("setup") or [])
    if setup:
        params["slurm_setup"] = setup
    params.update(c.get("submitit") or {})
    return params


def make_executor(jobs: List[FrozenJob], folder: Path):
    import submitit

    executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm",
                                     slurm_max_num_timeout=int(jobs[0].compute_params.get("max_requeues", 3)))
    params = executor_parameters(jobs[0])
    params["slurm_array_parallelism"] = int(jobs[0].compute_params.get("array_parallelism", 256))
    try:
        executor.update_parameters(**params)
    except (NameError, ValueError, TypeError) as exc:  # submitit names the parameters it accepts
        raise ConfigError("compute.submitit", " ".join(str(exc).splitlines()[:2])) from None
    return executor


def sbatch_script(job: FrozenJob) -> str:
    """The batch script submitit would write for this run (submitit builds it; nothing is submitted)."""
    executor = make_executor([job], Path(tempfile.gettempdir()) / "mltrain-dry-run" / "%j")
    inner = executor._executor  # the SlurmExecutor behind AutoExecutor: it owns the script template
    return inner._make_submission_file_text(inner._submitit_command_str, uid="DRYRUN")


def submit(jobs: List[FrozenJob], records: List[RunRecord], console: Console) -> list:
    """Submit every run (one array for a sweep); returns submitit jobs in the same order."""
    from mltrain.slurm_rank import SlurmRank

    sweep = len(jobs) > 1 and jobs[0].sweep_dir
    folder = Path(jobs[0].sweep_dir) / "submitit" if sweep else Path(jobs[0].run_dir) / "submitit"
    executor = make_executor(jobs, folder)
    from mltrain.launching import prepare_environment

    for job, record in zip(jobs, records):
        record.set_status(PREPARING)
        prepare_environment(job, record, RunLog(record.log_path(), console))
    if len(jobs) == 1:
        submitted = [executor.submit(SlurmRank(jobs[0].run_dir))]
    else:
        with executor.batch():
            pending = [executor.submit(SlurmRank(job.run_dir)) for job in jobs]
        submitted = pending
    for job, record, sjob in zip(jobs, records, submitted):
        record.set_status(QUEUED, slurm={"job_id": str(sjob.job_id), "submitit_folder": str(folder)})
        RunLog(record.log_path(), console).info(f"submitted as Slurm job {sjob.job_id}", show=True)
    return submitted


def sacct_states(job_ids: List[str]) -> Dict[str, str]:
    """{job id: state} from accounting in one call ('CANCELLED by 0' -> CANCELLED). Array members not
    started yet are listed as '<id>_[0-2]' and reported PENDING.

    Asked directly rather than through submitit's watcher, whose cache adds seconds to every change.
    """
    try:
        out = subprocess.run(["sacct", "-j", ",".join(job_ids), "-X", "-n", "-P", "-o", "JobID,State"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    states: Dict[str, str] = {}
    pending_arrays = set()
    for line in out.splitlines():
        if "|" not in line:
            continue
        jid, state = line.split("|", 1)
        states[jid] = (state.split() or ["UNKNOWN"])[0].upper()
        if "_[" in jid:
            pending_arrays.add(jid.split("_[")[0])
    for jid in job_ids:
        if jid not in states and jid.split("_")[0] in pending_arrays:
            states[jid] = "PENDING"
    return states


def sacct_state(job_id: str) -> Optional[str]:
    return sacct_states([job_id]).get(job_id)


def finalize(record: RunRecord, state: str) -> Tuple[str, Optional[str]]:
    """Final status and error of a run whose Slurm job has ended, from the ranks' own reports."""
    from mltrain import rankreports

    status = STATES.get(state, FAILED)
    failed_rank, error = rankreports.failure(record)
    if failed_rank is not None:
        record.update(failed_rank=failed_rank)
        if status == COMPLETED:
            status = FAILED
    elif status != COMPLETED:
        error = f"Slurm job {record.data['slurm']['job_id']} ended {state}"
    return status, error


def _stream(log_path: Path, offset: int, console: Console) -> int:
    chunk, offset = follow(log_path, offset)
    if chunk:
        console.raw(chunk)
    return offset


def wait(jobs: List[FrozenJob], records: List[RunRecord], submitted: list, consoles: List[Console],
         cancel: threading.Event) -> List[str]:
    """Follow every run to its end; on cancel, scancel them all. Returns final statuses."""
    stream = len(jobs) == 1 and jobs[0].console != "none"
    offset = 0
    final: Dict[int, str] = {}
    poll = float(jobs[0].compute_params.get("poll_s", 1.0))
    ids = [str(sjob.job_id) for sjob in submitted]
    while len(final) < len(jobs):
        if cancel.is_set():
            subprocess.run(["scancel", *[ids[i] for i in range(len(jobs)) if i not in final]], check=False, timeout=30)
        states = sacct_states([ids[i] for i in range(len(jobs)) if i not in final])
        for i, record in enumerate(records):
            if i in final:
                continue
            state = states.get(ids[i], "UNKNOWN")
            status = STATES.get(state)
            if status == RUNNING and record.status != RUNNING:
                record.set_status(RUNNING)
                consoles[i].status(RUNNING)
            if status in TERMINAL or (cancel.is_set() and state == "UNKNOWN"):
                record.set_status(FINALIZING)
                consoles[i].status(FINALIZING)
                result, error = finalize(record, state if status else "CANCELLED")
                if cancel.is_set() and result != COMPLETED:
                    result, error = CANCELED, "canceled by the user"
                record.set_status(result, error=error)
                final[i] = result
                if stream:
                    offset = _stream(record.log_path(0), offset, consoles[i])
                elapsed = record.data["phases"][result] - record.data["phases"]["Queued"]
                consoles[i].status(f"{result} in {elapsed:.1f}s  {record.dir}")
                if error and result == FAILED:
                    consoles[i].status(error)
        if stream and 0 not in final:
            offset = _stream(records[0].log_path(0), offset, consoles[0])
        if len(final) < len(jobs):
            time.sleep(poll)
    return [final[i] for i in range(len(jobs))]


def refresh(record: RunRecord) -> str:
    """Bring a detached Slurm run's record up to date from accounting (for `mltrain runs status`)."""
    if record.status in TERMINAL or "slurm" not in record.data:
        return record.status
    state = sacct_state(record.data["slurm"]["job_id"]) or "UNKNOWN"
    status = STATES.get(state)
    if status == RUNNING and record.status != RUNNING:
        record.set_status(RUNNING)
    elif status in TERMINAL:
        record.set_status(FINALIZING)
        result, error = finalize(record, state)
        record.set_status(result, error=error)
    return record.status


def cancel_run(record: RunRecord) -> None:
    job_id = record.data["slurm"]["job_id"]
    subprocess.run(["scancel", job_id], check=False, timeout=30)
    record.set_status(CANCELED, error="canceled by the user (scancel)")
