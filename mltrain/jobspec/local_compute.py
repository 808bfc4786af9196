"""The local backend's compute schema (`compute=local`): processes on this machine. It sits in the bottom
layer with the job spec (mltrain.jobspec.computes says why)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mltrain.jobspec.schema import ComputeConf


@dataclass
class LocalComputeConf(ComputeConf):
    """Processes on this machine: the embedded default."""

    kind: str = "local"
    # How many members of a sweep run at once.
    max_concurrent_jobs: int = 1
    # GPUs the run takes from this machine's pool (mltrain.backends.local.gpus), seen by all its ranks; 0 hides
    # every device; null = one per rank, as many as the machine has.
    gpus: Optional[int] = None
    # GPUs each rank gets for itself (its CUDA_VISIBLE_DEVICES lists only those); null = see gpus.
    gpus_per_task: Optional[int] = None
