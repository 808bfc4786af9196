"""The mpi backend: like the local one, but the ranks are started by one `mpirun` (Open MPI)."""
from __future__ import annotations

import dataclasses
import os
import shutil
import threading
from typing import Any, Optional

from mltrain.backends.base import PORT, Outcome, Plan, with_port
from mltrain.backends.local.backend import LocalBackend
from mltrain.backends.local.gpus import DeviceLease, visible_gpus
from mltrain.backends.local.ports import claim_port
from mltrain.backends.mpi.driver import MpiSupervisor, mpirun_command
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.ranks import contract
from mltrain.runs.console import Console, RunLog
from mltrain.runs.record import RunRecord


class MpiBackend(LocalBackend):
    name = "mpi"

    def check(self, cfg: Any) -> Optional[str]:
        if shutil.which("mpirun") is None:
            raise ConfigError("distribution", "distribution=mpi needs Open MPI's `mpirun` on PATH; install it with "
                              "`apt-get install openmpi-bin` (Debian/Ubuntu) or your cluster's MPI module")
        dist = cfg.distribution
        gpus = visible_gpus()
        limit, what = (gpus, "GPUs") if gpus else (os.cpu_count() or 1, "CPUs")
        ranks = dist.process_count_per_node * dist.node_count  # simulated nodes all run here
        if ranks > limit and not dist.oversubscribe:
            raise ConfigError("distribution.process_count_per_node",
                              f"{ranks} ranks but this machine has {limit} {what}; "
                              "set distribution.oversubscribe=true to allow it")
        return super().check(cfg)

    def plan(self, job: FrozenJob, share: int = 1) -> Plan:
        argv, env = mpirun_command(job, PORT)
        return Plan(job, contract.plan(job, "127.0.0.1", PORT, max(1, (os.cpu_count() or 1) // share)),
                    notes=[f"MASTER_PORT ({PORT}) is handed out by the OS when the run starts",
                           "mpirun: " + " ".join(argv)],
                    details={"mpirun": argv, "mpirun_env": env})

    def _supervise(self, plan: Plan, record: RunRecord, log: RunLog, console: Console,
                  cancel: threading.Event, lease: DeviceLease) -> Outcome:
        with claim_port() as port:
            argv, env = with_port(plan.details["mpirun"], plan.details["mpirun_env"], port.port)
            if lease.devices:  # every rank sees the run's devices and picks cuda:LOCAL_RANK
                env = {**env, "CUDA_VISIBLE_DEVICES": ",".join(lease.devices)}
                if "CUDA_VISIBLE_DEVICES" not in argv:
                    argv = argv[:1] + ["-x", "CUDA_VISIBLE_DEVICES"] + argv[1:]
            record.update(world=dataclasses.replace(record.doc.world, master_addr="127.0.0.1", master_port=port.port),
                          backend_parts={self.name: {"mpirun": argv}})
            return MpiSupervisor(argv, env, plan.job, record, log, console, cancel).run()
