"""The local backend: a run's ranks are children of the driver (`mltrain`) on this machine.

The driver is the supervisor: it starts the ranks, fails fast, records how they ended. A run it is
no longer watching (the driver was killed) has its status settled by the run handle.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any, Dict, List, Optional, Tuple

from mltrain.backends.base import (
    PORT,
    Backend,
    Outcome,
    Plan,
    failure_text,
    lose_orphan,
    prepare_environment,
    process_group,
    stop_driver,
)
from mltrain.backends.handover import cancel_reason
from mltrain.backends.local.gpus import (
    DeviceLease,
    GpuPool,
    check_declared,
    device_request,
    machine_devices,
    split,
    visible_gpus,
)
from mltrain.backends.local.ports import claim_port
from mltrain.backends.local.supervisor import LocalSupervisor
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.local_compute import LocalComputeConf
from mltrain.jobspec.schema import ComputeConf, compute_as
from mltrain.jobspec.status import CANCELED, FAILED, QUEUED, RUNNING, TERMINAL
from mltrain.ranks import contract
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: Said once by a run of several nodes on the local compute (torchrun --nnodes=N on one host, TorchX's -j NxM).
SIMULATED = ("{nodes} nodes simulated on this machine: each node's ranks get the variables a cluster node's would "
             "(NODE_RANK, LOCAL_RANK, ...) and the rendezvous is on 127.0.0.1")


class LocalBackend(Backend):
    name = "local"
    # A look at a local run is a stat and a small JSON read: a waiting handle (Run.wait, the SDKs'
    # wait_for_completion) sees the end within 50 ms, as the command that ran it would.
    wait_poll_s = 0.05

    def check(self, cfg: Any) -> Optional[str]:
        if cfg.run.get("hang_action") == "requeue":
            raise ConfigError("run.hang_action", "requeue runs a hung job again from its checkpoints through a "
                              "cluster's queue; compute=local has none (use compute=slurm, or fail)", ["fail"])
        if cfg.run.detach:
            raise ConfigError("run.detach", "only compute=slurm runs can be detached (use mltrain.submit() for a "
                              "local run in the background)")
        if cfg.job.get("use_gpu") is True and visible_gpus() == 0:
            raise ConfigError("job.use_gpu", "true, but no GPU is visible on this machine (compute=local)")
        devices = machine_devices()
        check_declared(devices)
        self._check_gpu_request(cfg, devices)
        return process_group(cfg, self._gpus_per_node(cfg), "none is visible here")

    @staticmethod
    def _check_gpu_request(cfg: Any, devices: List[str]) -> None:
        """A request no device of this machine can satisfy is refused before anything starts."""
        asked, per_task = cfg.compute.get("gpus"), cfg.compute.get("gpus_per_task")
        nodes = int(cfg.distribution.node_count)
        ranks = int(cfg.distribution.process_count_per_node) * nodes
        have = f"this machine has {len(devices)} GPU(s)" + (f" ({','.join(devices)})" if devices else
                                                            " (CUDA_VISIBLE_DEVICES unset and no NVIDIA driver)")
        if per_task is not None:
            if asked is not None and int(asked) * nodes != int(per_task) * ranks:
                raise ConfigError("compute.gpus_per_task", f"{per_task} per rank x {ranks} rank(s) is "
                                  f"{int(per_task) * ranks} GPUs, but compute.gpus is {asked}"
                                  + (" per node" if nodes > 1 else "") + "; set one of the two")
            if int(per_task) * ranks > len(devices):
                raise ConfigError("compute.gpus_per_task", f"{per_task} per rank x {ranks} rank(s) is "
                                  f"{int(per_task) * ranks} GPUs; {have}")
        elif asked is not None and int(asked) * nodes > len(devices):
            per_node = f" per node x {nodes} nodes" if nodes > 1 else ""
            raise ConfigError("compute.gpus", f"{asked} asked{per_node}; {have}", [f"0-{len(devices) // nodes}", "null"])

    @staticmethod
    def _gpus_per_node(cfg: Any) -> int:
        per_task = cfg.compute.get("gpus_per_task")
        cap = cfg.compute.get("gpus") if per_task is None else int(per_task) * int(cfg.distribution.process_count_per_node)
        return visible_gpus() if cap is None else min(int(cap), visible_gpus())

    def wrap_ranks(self, compute: ComputeConf, environment: Dict[str, Any],
                   run_dir: str) -> Tuple[List[str], Dict[str, str]]:
        # compute.gpus=0 hides every device; the others are taken from the machine's pool when the run starts
        return [], {"CUDA_VISIBLE_DEVICES": ""} if compute_as(compute, LocalComputeConf).gpus == 0 else {}

    # ------------------------------------------------------------------ submission
    def concurrency(self, compute: Any) -> Optional[int]:
        return int(compute.max_concurrent_jobs)

    def plan(self, job: FrozenJob, share: int = 1) -> Plan:
        plan = Plan(job, contract.plan(job, "127.0.0.1", PORT, max(1, (os.cpu_count() or 1) // (share * job.node_count))),
                    notes=[f"MASTER_PORT ({PORT}) is handed out by the OS when the run starts"])
        if job.node_count > 1:
            plan.notes.append(SIMULATED.format(nodes=job.node_count))
        request = device_request(job)
        if request is not None:
            pool = GpuPool.of_machine()
            free = pool.free()
            now = split(free[: request.count], job, request.per_rank) if len(free) >= request.count else None
            for spec, seen in zip(plan.ranks, now or [["<given when the run starts>"]] * len(plan.ranks)):
                spec["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(seen)
            plan.notes.append(f"GPUs: {request.count} of this machine's {len(pool.devices)} ({','.join(pool.devices)}), "
                              + ("one set per rank" if request.per_rank else "seen by every rank")
                              + f", taken from the pool when the run starts (free now: {','.join(free) or 'none'})")
        return plan

    def launch(self, plans: List[Plan], records: List[RunRecord], consoles: List[Console],
               cancel: threading.Event) -> List[str]:
        for record, console in zip(records, consoles):
            record.set_status(QUEUED)
            RunLog(record.log_path(), console).info(QUEUED, show=True)
        parallel = max(1, min(compute_as(plans[0].job.compute, LocalComputeConf).max_concurrent_jobs, len(plans)))
        if parallel == 1:
            return [self._run(p, r, c, cancel) for p, r, c in zip(plans, records, consoles)]
        with ThreadPoolExecutor(parallel) as pool:
            futures = [pool.submit(self._run, p, r, c, cancel) for p, r, c in zip(plans, records, consoles)]
            while not all(f.done() for f in futures):
                time.sleep(0.05)  # keep the main thread free to take signals
            return [f.result() for f in futures]

    def _run(self, plan: Plan, record: RunRecord, console: Console, cancel: threading.Event) -> str:
        """One run from Queued to its final status."""
        job = plan.job
        log = RunLog(record.log_path(), console)
        log.info(f"overrides: {' '.join(job.overrides) or '(none)'}")
        listing = None
        try:
            with self._devices(plan, record, log, cancel) as lease:
                if cancel.is_set():
                    waited = ", while waiting for GPUs" if lease.request and not lease.devices else ""
                    outcome = Outcome(CANCELED, error=f"{cancel_reason(cancel)} (before start{waited})")
                else:
                    listing = prepare_environment(job, record, log, cancel)
                    if cancel.is_set():
                        outcome = Outcome(CANCELED, error=f"{cancel_reason(cancel)} (before start)")
                    else:
                        record.set_status(RUNNING)
                        layout = f"{job.world_size} rank(s)" + (f", {job.process_group}" if job.process_group else "")
                        gpus = f", GPUs {','.join(lease.devices)}" if lease.devices else ""
                        log.info(f"{RUNNING} ({layout}, {self.name}{gpus})", show=True)
                        if job.node_count > 1:
                            log.info(SIMULATED.format(nodes=job.node_count), show=True)
                        outcome = self._supervise(plan, record, log, console, cancel, lease)
        except Exception as exc:  # a failure here must still leave a final status
            if cancel.is_set():  # the build stopped, or its pip was stopped by the same Ctrl-C: not a failure
                outcome = Outcome(CANCELED, error=f"{cancel_reason(cancel)} (while preparing: {failure_text(exc)})")
            else:
                outcome = Outcome(FAILED, error=failure_text(exc))
        if listing is not None:
            listing.join(timeout=60)
        return finish(record, outcome.status, outcome.error, outcome.failed_rank, console)

    @staticmethod
    def _devices(plan: Plan, record: RunRecord, log: RunLog, cancel: threading.Event) -> DeviceLease:
        """The run's GPUs from the machine's pool, waiting (Queued, saying for what) while other runs hold
        them; an empty lease where the run takes none. Taken while Queued, so that the run's phases say
        how long it waited for them; its environment is then prepared holding them (a cached one: no time)."""
        request = device_request(plan.job)
        if request is None:
            return DeviceLease([])

        def waiting(text: str) -> None:
            log.info(f"{QUEUED}: {text}", show=True)

        lease = GpuPool.of_machine().take(request.count, f"run {record.doc.id} (pid {os.getpid()})", cancel, waiting)
        lease = lease or DeviceLease([])
        lease.request = request
        return lease

    def _supervise(self, plan: Plan, record: RunRecord, log: RunLog, console: Console,
                  cancel: threading.Event, lease: DeviceLease) -> Outcome:
        devices = split(lease.devices, plan.job, lease.request.per_rank) if lease.request and lease.devices else None
        with claim_port() as port, ExitStack() as held:
            # TF_CONFIG (distribution.tf_config): a port of its own for each rank's TensorFlow server,
            # claimed like MASTER_PORT so that no run started at the same time is handed it
            workers = [f"127.0.0.1:{held.enter_context(claim_port()).port}"
                       for _ in range(plan.job.world_size if plan.job.distribution.tf_config else 0)]
            return LocalSupervisor(plan, record, log, console, cancel, devices, lease.fds).run(port.port, workers)

    # ------------------------------------------------------------------ the run handle's view
    def refresh(self, records: List[RunRecord]) -> None:
        """A run whose driver is gone without recording an end will never end: it Failed, "driver lost".
        Its ranks do not outlive the driver: the guard started with them stops them (supervisor.py)."""
        for record in records:
            lose_orphan(record, "before the run ended; its guard stopped the ranks")

    def cancel(self, record: RunRecord) -> None:
        """The driver stops every rank and records Canceled."""
        if record.status not in TERMINAL:
            stop_driver(record)
            self.refresh([record])
