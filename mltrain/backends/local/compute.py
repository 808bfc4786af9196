"""The local backend's compute schema (`compute=local`): processes on this machine. It sits in the bottom
layer with the job spec (mltrain.backends.computes says why)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from mltrain.spec.schema import ComputeConf


@dataclass
class LocalComputeConf(ComputeConf):
    """Processes on this machine: the embedded default."""

    kind: str = "local"
    # How many members of a sweep run at once.
    max_concurrent_jobs: int = 1
    # GPUs the ranks may use; null = every visible GPU.
    gpus: Optional[int] = None
