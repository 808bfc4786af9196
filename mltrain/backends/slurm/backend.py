"""The slurm backend: submitit submits, Slurm's accounting tells the state, scancel stops."""
from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from mltrain.backends.base import (
    Backend,
    Plan,
    driver_alive,
    failure_text,
    lose_orphan,
    process_group,
    stop_driver,
)
from mltrain.backends.slurm import accounting, driver, gpu_binding, pack, pack_driver
from mltrain.backends.slurm.containers import container_flags
from mltrain.backends.slurm.run_part import slurm_job
from mltrain.backends.slurm.submission import executor_parameters, make_executor, sbatch_script
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import ComputeConf, compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, TERMINAL
from mltrain.ranks import contract, reports
from mltrain.runs.console import Console
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

FIRST_NODE, JOB_PORT = "<first node>", "<from job id>"
#: How long a cancel issued before the job id is known waits for the driver to carry it out.
CANCEL_WAIT_S = 30.0
#: How old an accounting answer another look in this process got may be for refresh() to use it (SharedQuery).
REFRESH_FRESH_S = 1.0


class SlurmBackend(Backend):
    name = "slurm"
    containers = True
    wait_poll_s = 0.5

    def __init__(self) -> None:
        self._checked: Set[str] = set()  # executor parameter sets submitit has already accepted

    def check(self, cfg: Any) -> Optional[str]:
        gpu_binding.check(cfg)
        max_nodes = cfg.compute.max_nodes
        if max_nodes is not None and cfg.distribution.node_count > max_nodes:
            raise ConfigError("distribution.node_count",
                              f"{cfg.distribution.node_count} exceeds compute.max_nodes={max_nodes}")
        gpus = gpu_binding.per_node(cfg.compute.gpus_per_node, cfg.compute.get("gpus_per_task"),
                                    cfg.distribution.process_count_per_node)
        return process_group(cfg, gpus, "compute.gpus_per_node is 0")

    def wrap_ranks(self, compute: ComputeConf, environment: Dict[str, Any],
                   run_dir: str) -> Tuple[List[str], Dict[str, str]]:
        return container_flags(compute_as(compute, SlurmComputeConf), environment, run_dir)[1], {}

    def validate(self, job: FrozenJob) -> None:
        """submitit's own check of the executor parameters (it names the valid ones), before anything
        exists; a sweep's members usually share their parameters, so each set is checked once."""

        pack_driver.check(job)
        params = executor_parameters(job)
        key = repr(sorted(params.items()))
        if key not in self._checked:
            compute = compute_as(job.compute, SlurmComputeConf)
            make_executor(params, Path(job.run_dir) / "submitit", compute.max_requeues, offline=True)  # creates nothing
            self._check_partition(job.node_count, compute)
            self._checked.add(key)

    def _check_partition(self, nodes: int, compute: SlurmComputeConf) -> None:
        """More nodes than the partition has would be Slurm's "More processors requested than permitted"
        at submission, which names neither number: ask the partition's size first. Only where Slurm
        answers (a dry run on a laptop still shows the batch script)."""
        if nodes <= 1 or shutil.which("scontrol") is None:
            return
        part = accounting.partition(_partition_name(compute))
        if part is None:
            return
        key = "distribution.node_count"
        if nodes > part.total_nodes:
            raise ConfigError(key, f"{nodes} nodes asked of Slurm partition '{part.name}', which has {part.total_nodes} "
                                   f"node{'s' if part.total_nodes != 1 else ''}")
        if part.max_nodes is not None and nodes > part.max_nodes:
            raise ConfigError(key, f"{nodes} nodes asked of Slurm partition '{part.name}', which allows at most "
                                   f"{part.max_nodes} per job (MaxNodes)")

    def preflight(self, jobs: Sequence[FrozenJob] = ()) -> None:
        if shutil.which("sbatch") is None or shutil.which("srun") is None:
            raise ConfigError("compute=slurm", "no Slurm here: srun and sbatch are not on PATH (run on a Slurm "
                              "login node, or use --dry-run to see the batch script)")
        unpacked = [job for job in jobs if not pack_driver.packs(job)]
        if len(unpacked) > 1:
            driver.check_job_count(len(unpacked), accounting.limits().max_job_count)
        # a sweep's members are often one job object given n times: each asked about once
        distinct = {id(job): job for job in jobs}.values()
        requests = [(_partition_name(c), c, job.process_count_per_node, c.pack_slots if pack_driver.packs(job) else 1)
                    for job in distinct for c in [compute_as(job.compute, SlurmComputeConf)]]
        gpu_binding.check_partition(requests)

    # ------------------------------------------------------------------ submission
    def plan(self, job: FrozenJob, share: int = 1) -> Plan:
        return Plan(job, contract.plan(job, FIRST_NODE, JOB_PORT),
                    notes=["MASTER_ADDR is the first node of the allocation; MASTER_PORT is derived from the Slurm "
                           "job id"],
                    details={"executor": executor_parameters(job), "folder": str(Path(job.run_dir) / "submitit")})

    def describe(self, plan: Plan) -> List[str]:
        if pack_driver.packs(plan.job):
            return [*plan.notes, *pack_driver.describe(plan)]
        max_requeues = compute_as(plan.job.compute, SlurmComputeConf).max_requeues
        script = sbatch_script(plan.details["executor"], Path(plan.details["folder"]), max_requeues)
        return [*plan.notes, "submitit parameters: " + repr(plan.details["executor"]), "sbatch script:",
                *("  " + line for line in script.splitlines())]

    def launch(self, plans: List[Plan], records: List[RunRecord], consoles: List[Console],
               cancel: threading.Event) -> List[str]:
        if pack_driver.packs(plans[0].job):
            return pack_driver.launch(plans, records, consoles, cancel)
        try:
            ids = driver.submit(plans, records, consoles)
        except Exception as exc:  # no job stays on the cluster (driver.submit withdraws a partial sweep)

            said = str(exc) if type(exc).__module__.startswith("submitit") else failure_text(exc)
            reason = f"submission to Slurm failed: {said}"
            for record, console in zip(records, consoles):
                finish(record, FAILED, error=" ".join(reason.split()), console=console)
            return [FAILED] * len(plans)
        self._honour_early_cancels(records, consoles, ids)
        if plans[0].job.detach:
            for plan, record, console, job_id in zip(plans, records, consoles, ids):
                if record.status in TERMINAL:
                    continue
                if not record.doc.detached:  # driver.submit writes it with the job id
                    record.update(detached=True)
                console.status(f"detached: run {plan.job.run_id} is Slurm job {job_id}; follow it with "
                               f"`mltrain runs status|logs|cancel {plan.job.run_id}`")
            return [r.status if r.status in TERMINAL else QUEUED for r in records]
        return driver.wait(plans, records, ids, consoles, cancel)

    def _honour_early_cancels(self, records: List[RunRecord], consoles: List[Console], ids: List[str]) -> None:
        """A cancel asked before the job ids were known (`run.cancel()` right after `mltrain.submit`): it
        was recorded beside run.json and is carried out now that they are. The canceller looks for a job
        id after leaving its request, and this looks for the request after recording the id: one of
        the two always sees the other, so the cancel is never lost."""
        asked = [(record, console, job_id) for record, console, job_id in zip(records, consoles, ids)
                 if record.cancel_requested()]
        if not asked:
            return
        accounting.scancel([job_id for _, _, job_id in asked])
        for record, console, job_id in asked:
            reason = record.cancel_requested() or "canceled by the user"
            driver.settle(record, accounting.JobState("CANCELLED"), console,
                          canceled=f"{reason} (before Slurm job {job_id} started; scancel)")

    # ------------------------------------------------------------------ the run handle's view
    def refresh(self, records: List[RunRecord]) -> None:
        packed = [r for r in records if r.status not in TERMINAL and pack.packed_in(r) is not None]
        for record in packed:  # its Slurm job is its worker's, which runs other members too
            pack_driver.refresh(record)
        jobs = {id(r): slurm_job(r) for r in records if r.status not in TERMINAL and r not in packed}
        job_ids = {key: job.job_id for key, job in jobs.items() if job is not None}
        for record in records:  # made, never submitted (no job id, no worker's queue entry): only its driver could
            if id(record) in jobs and id(record) not in job_ids:
                lose_orphan(record, "before the run was submitted to Slurm",
                            lambda r: slurm_job(r) is None and pack.packed_in(r) is None)
        pending = [r for r in records if id(r) in job_ids]
        seen = {id(r): reports.read_now(r.dir) for r in pending}
        finished = [r for r in pending if reports.ended_well(r.dir, r.doc.world.world_size, seen[id(r)])]
        states = accounting.query_shared([job_ids[id(r)] for r in pending if r not in finished], fresh_s=REFRESH_FRESH_S)
        for record in pending:
            record.reload()
            if record.status in TERMINAL:
                continue
            if record in finished:  # the ranks' own report, with their own clocks
                start, end = reports.span(seen[id(record)])
                driver.settle(record, accounting.JobState("COMPLETED", start, end))
            elif job_ids[id(record)] in states:  # no answer from accounting: what the record says stands
                driver.settle(record, states[job_ids[id(record)]])

    def take_back(self, record: RunRecord) -> bool:
        # A Slurm job of its own starts without its driver; a packed member waits for a worker, and the driver
        # that died may have queued it before submitting any (pack_driver.take_back).
        return pack.packed_in(record) is not None and pack_driver.take_back(record)

    def locate(self, record: RunRecord) -> Optional[str]:
        job_id = record.scheduler_job_id
        return f"Slurm job {job_id}" if job_id else None

    holds_dependencies = True

    def after(self, job: FrozenJob, parents: List[RunRecord]) -> FrozenJob:
        """afterok on the parents' jobs that have not completed yet; kill_on_invalid_dep makes Slurm
        itself remove the job when a parent fails, so no driver has to be there to do it."""
        waits = [p.scheduler_job_id for p in parents if p.status != COMPLETED and p.scheduler_job_id]
        if not waits:
            return job
        compute = compute_as(job.compute, SlurmComputeConf)
        extra = {**compute.additional_parameters, "dependency": "afterok:" + ":".join(waits),
                 "kill_on_invalid_dep": "yes"}
        return dataclasses.replace(job, compute=dataclasses.replace(compute, additional_parameters=extra))

    def concurrency(self, compute: Any) -> Optional[int]:
        return getattr(compute, "pack", 0) or getattr(compute, "array_parallelism", None)

    def cancel(self, record: RunRecord) -> None:
        self.refresh([record])
        if record.status in TERMINAL:
            return
        if pack.packed_in(record) is not None:
            pack_driver.cancel(record)
            return
        if slurm_job(record) is None and not self._cancel_before_submission(record):
            return
        job = slurm_job(record)  # read again: the wait above reloads the record
        assert job is not None
        # A detached driver leaves once the job is queued (whether record.detached is written yet or not):
        # the job is cancelled here. An attached one is watching it: it scancels and records Canceled.
        detached = record.doc.detached or FrozenJob.load(record.dir).detach
        if not detached and stop_driver(record):
            record.reload()
            if record.status in TERMINAL:
                return
        job_id = job.job_id
        accounting.scancel([job_id])
        state = accounting.JobState("CANCELLED")
        driver.settle(record, state, canceled="canceled by the user (scancel)")

    def _cancel_before_submission(self, record: RunRecord) -> bool:
        """A run whose job id is not known yet: leave the request for its driver (which honours it as
        soon as it has the id), then wait while the driver lives for the run to end or its id to
        appear. True when the id is known now (the caller cancels the job itself)."""
        record.request_cancel("canceled by the user")
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            record.reload()
            if record.status in TERMINAL:
                return False
            if slurm_job(record) is not None:
                return True
            if not driver_alive(record):
                # No driver will ever submit it: the run ends here, and nothing reached Slurm.
                finish(record, CANCELED, error="canceled by the user before it was submitted to Slurm")
                return False
            time.sleep(0.05)
        return False  # still preparing (an environment being built): the driver cancels it once it has the id



def _partition_name(compute: SlurmComputeConf) -> Optional[str]:
    """The partition a run asks for, under any of the names it can be given; None: the cluster's default."""
    name = compute.partition or compute.additional_parameters.get("partition") or compute.submitit.get("slurm_partition")
    return str(name) if name else None
