"""The frozen job: everything a backend needs to start the ranks, decided once at submission.

config (DictConfig) --freeze--> FrozenJob --backend--> ranks --> run record.

Freezing resolves every interpolation (`${now:}` included) exactly once; the resolved config is
written to the run directory and every rank, requeue and rerun reads that copy (hydra #2070).
Compute and distribution settings are the schema's own dataclasses (mltrain.jobspec.schema), so
their defaults live in one place. Loading a FrozenJob imports neither Hydra nor OmegaConf: a rank
on a cluster node reads job.json and starts.
"""
from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Union

from mltrain.jobspec.computes import backend_for, compute_from_dict
from mltrain.jobspec.schema import ComputeConf, DistributionConf, distribution_from_dict

#: job.json layout version; files without one were written before the package layout (0.1.0).
LAYOUT = 2

#: The rank program of a plain Hydra app using this launcher: it unpickles the task function.
#: Kept as `mltrain.hydra_task` (a re-export) because job.json files name it.
HYDRA_TASK_MODULE = "mltrain.hydra_task"


@dataclass(frozen=True)
class FrozenJob:
    run_id: str
    run_dir: str
    experiment: str
    # The Backend that runs it (mltrain.backends.BACKENDS), chosen once at freezing.
    backend: str
    compute: ComputeConf
    distribution: DistributionConf
    # The torch.distributed backend the ranks use (gloo | nccl), None without a process group.
    process_group: Optional[str]
    argv: List[str]
    cwd: str
    # Job-level variables every rank gets on top of the rank contract (params, environment, MLTRAIN_*).
    env: Dict[str, str]
    overrides: List[str]
    console: str = "rank0"
    kill_grace_s: float = 5.0
    # Seconds between two samples of the ranks' system metrics (mltrain.ranks.system_metrics); 0: none.
    system_metrics_s: float = 0.0
    # Seconds without progress after which the run is hung (mltrain.ranks.hangs); 0: never.
    hang_timeout_s: float = 0.0
    # fail | requeue (on a cluster): what a hung run does once every rank's stack is taken.
    hang_action: str = "fail"
    sweep_dir: Optional[str] = None
    sweep_index: Optional[int] = None
    snapshot_source: Optional[str] = None
    # Return right after submission (a cluster run).
    detach: bool = False
    # The resolved environment spec, and whether the ranks run in its docker image (on a cluster).
    environment: Dict[str, Any] = field(default_factory=dict)
    # The resolved config (no `hydra` node), as written to config.yaml.
    config: Dict[str, Any] = field(default_factory=dict)
    layout: int = LAYOUT

    @property
    def node_count(self) -> int:
        return self.distribution.node_count

    @property
    def process_count_per_node(self) -> int:
        return self.distribution.process_count_per_node

    @property
    def world_size(self) -> int:
        return self.node_count * self.process_count_per_node

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> FrozenJob:
        data = upgrade(data)
        return cls(**{**data, "compute": compute_from_dict(data["compute"]),
                      "distribution": distribution_from_dict(data["distribution"])})

    @classmethod
    def load(cls, run_dir: Union[str, Path]) -> FrozenJob:
        with open(Path(run_dir) / "job.json", encoding="utf-8") as f:
            return cls.from_json(json.load(f))


def upgrade(data: Dict[str, Any]) -> Dict[str, Any]:
    """A job.json of the 0.1.0 layout (flat strings, compute_params) in today's form. That layout named no
    backend: its compute and distribution tell it, as for today's jobs."""
    if data.get("layout", 0) >= LAYOUT:
        return data
    old = dict(data)
    compute_kind, distribution_kind = old.pop("compute"), old.pop("distribution")
    compute = dict(old.pop("compute_params", None) or {"kind": compute_kind})
    old.pop("max_concurrent_jobs", None)
    distribution = dict((old.get("config") or {}).get("distribution") or {})
    distribution.update(kind=distribution_kind, node_count=old.pop("node_count"),
                        process_count_per_node=old.pop("process_count_per_node"))
    return {**old, "compute": compute, "distribution": distribution, "process_group": old.pop("backend"),
            "backend": backend_for(compute_kind, distribution_kind), "layout": LAYOUT}


#: The ids this process gave in the current second: a sweep freezes hundreds of members a second, and 3 random
#: bytes then repeat about once in 100 sweeps of 1,000 members (one was refused "a run already exists", and the
#: sweep with it: seen 2026-12-07).
_given: Dict[str, Set[str]] = {}


def new_run_id(experiment: str) -> str:
    stamp = time.strftime("%Y%m%d_%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in experiment) or "run"
    given = _given.setdefault(stamp, set())
    if len(_given) > 1:  # an earlier second's ids can no longer repeat
        for old in [s for s in _given if s != stamp]:
            del _given[old]
    while True:
        run_id = f"{safe}_{stamp}_{secrets.token_hex(3)}"
        if run_id not in given:
            given.add(run_id)
            return run_id
