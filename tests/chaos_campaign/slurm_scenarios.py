"""The Slurm scenarios: the local ones with `compute=slurm` on the one-node test cluster, and their faults
(the controller restarted, a job requeued, a packed worker killed)."""
from __future__ import annotations

from typing import List, Tuple

from .local_pipeline import LocalPipeline
from .local_sweep import LocalSweep

SLURM_FAULTS = ("kill_driver", "sigint_foreground", "requeue", "restart_slurmctld")


class SlurmArraySweep(LocalSweep):
    name = "slurm_array_sweep"
    needs = "slurm"
    faults = SLURM_FAULTS
    unit_s = 2.0
    limit_s = 240.0
    extra = ("compute=slurm",)


class SlurmPackedSweep(LocalSweep):
    name = "slurm_packed_sweep"
    needs = "slurm"
    faults = SLURM_FAULTS + ("kill_packed_worker",)
    unit_s = 2.0
    limit_s = 240.0
    extra = ("compute=slurm", "compute.pack=2")

    def packed_worker_pids(self) -> List[Tuple[str, int]]:
        return self.t.processes_running("pack_driver", "pack_worker")


class SlurmPipeline(LocalPipeline):
    name = "slurm_pipeline"
    needs = "slurm"
    faults = SLURM_FAULTS
    unit_s = 2.0
    limit_s = 240.0
    extra = ("compute=slurm",)
