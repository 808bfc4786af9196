"""The compute kinds' table: which schema types each `compute=KIND`, and which backend runs a job.

The built-in compute kinds' schemas sit beside this table (mltrain.jobspec.<name>_compute); it is, with
mltrain.backends.BACKENDS, where a backend is listed. Both are in the bottom layer (tests/unit/test_import_graph.py):
the job spec rebuilds a frozen job's typed compute from them without loading a backend. A backend
installed as a package of its own lists itself under the entry-point groups `mltrain.computes` and
`mltrain.backends` (as TorchX's schedulers do under `torchx.schedulers`); they are read only when a
name is not built in, so the commands that use the built-in ones pay nothing for the scan (about 80 ms).
"""
from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Type

from mltrain.base.errors import ConfigError
from mltrain.jobspec.schema import build

if TYPE_CHECKING:
    from mltrain.jobspec.schema import ComputeConf

#: compute kind -> "module:class" of its schema.
COMPUTES: Dict[str, str] = {
    "local": "mltrain.jobspec.local_compute:LocalComputeConf",
    "slurm": "mltrain.jobspec.slurm_compute:SlurmComputeConf",
}

#: The compute a job without one runs on (a Hydra app's launcher without `compute`, a 0.1.0 job).
DEFAULT_COMPUTE = "local"
#: Set in the environment of a driver that runs on a remote compute's cluster (mltrain.backends.remote.far_side)
ON_CLUSTER_ENV = "MLTRAIN_ON_CLUSTER"

#: (compute kind, distribution kind) -> backend, where the pair decides it; otherwise the compute's own
#: backend. On Slurm, srun starts MPI ranks itself, so `distribution=mpi` stays with the Slurm backend;
#: on this machine an MPI job needs mpirun.
_CHOICE: Dict[Tuple[str, str], str] = {("local", "mpi"): "mpi"}

_plugins: Dict[str, Dict[str, str]] = {}
_schemas: Dict[str, Type[ComputeConf]] = {}


def plugins(group: str) -> Dict[str, str]:
    """The installed packages' entries of one entry-point group, name -> "module:attr" (read once, and only
    for a name not built in: importlib.metadata and the scan cost about 80 ms)."""
    if group not in _plugins:
        from importlib.metadata import entry_points  # startup

        _plugins[group] = {ep.name: ep.value for ep in entry_points(group=group)}
    return _plugins[group]


def compute_kinds() -> List[str]:
    """Every compute kind: the built-in ones, then the installed packages'."""
    return list(COMPUTES) + [k for k in plugins("mltrain.computes") if k not in COMPUTES]


def compute_schema(kind: str) -> Optional[Type[ComputeConf]]:
    """The schema of `compute=kind`, or None when no backend provides that kind."""
    if kind not in _schemas:
        where = COMPUTES.get(kind) or plugins("mltrain.computes").get(kind)
        if where is None:
            return None
        module, _, cls = where.partition(":")
        _schemas[kind] = getattr(importlib.import_module(module), cls)
    return _schemas[kind]


def builtin_schemas() -> Dict[str, Type[ComputeConf]]:
    """The built-in kinds' schemas (Hydra's ConfigStore registers them as `<kind>_schema`)."""
    out: Dict[str, Type[ComputeConf]] = {}
    for kind in COMPUTES:
        schema = compute_schema(kind)
        assert schema is not None
        out[kind] = schema
    return out


def compute_from_dict(values: Dict[str, Any], key: str = "compute") -> ComputeConf:
    """Typed compute settings from plain data (a frozen job, a Hydra app's launcher options).

    Defaults live only in the backends' schemas; an unknown kind or key raises ConfigError naming the valid ones.
    """
    kind = str(values.get("kind", DEFAULT_COMPUTE))
    schema = compute_schema(kind)
    if schema is None:
        raise ConfigError(f"{key}.kind", f"'{kind}' is not supported", compute_kinds())
    return build(schema, values, key)


def remote_login(compute: Any) -> Optional[str]:
    """The ssh destination of a compute (a typed one or its config) that is a remote cluster, else None."""
    login = compute.get("login") if str(compute.get("kind")) == "slurm" else None
    return str(login) if login else None


def backend_for(compute_kind: str, distribution_kind: str, login: Optional[str] = None) -> str:
    """Which backend runs a job: the one place that reads the settings. A Slurm compute with a `login` is a
    cluster reached over ssh (mltrain.backends.remote), except on that cluster itself: a sweep's or pipeline's
    driver sent there (ON_CLUSTER_ENV set) submits its members to the Slurm it runs beside."""
    if login and compute_kind == "slurm" and not os.environ.get(ON_CLUSTER_ENV):
        return "remote"
    return _CHOICE.get((compute_kind, distribution_kind), compute_kind)
