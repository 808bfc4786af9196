"""Backends: what starts a frozen job's ranks, watches them and stops them.

Each backend is a package owning its driver side and its rank side (local: processes on this
machine; mpi: one `mpirun` on this machine; slurm: a Slurm job through submitit). They are found in
one table and imported only when used, as TorchX does with its schedulers, so composing a config
or printing help never loads a backend.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable, Dict, List, Tuple

from mltrain.base.errors import MltrainError
from mltrain.jobspec import computes
from mltrain.jobspec.computes import backend_for
from mltrain.jobspec.status import TERMINAL

if TYPE_CHECKING:
    from mltrain.backends.base import Backend
    from mltrain.runs.record import RunRecord

#: backend name (FrozenJob.backend) -> "module:class". A backend with a compute kind of its own also has a
#: line in mltrain.jobspec.computes; one installed as a package lists itself under the entry-point group
#: `mltrain.backends`, read only for a name not built in.
BACKENDS: Dict[str, str] = {
    "local": "mltrain.backends.local.backend:LocalBackend",
    "mpi": "mltrain.backends.mpi.backend:MpiBackend",
    "slurm": "mltrain.backends.slurm.backend:SlurmBackend",
    "remote": "mltrain.backends.remote.backend:RemoteBackend",
}

_loaded: Dict[str, Backend] = {}


def get(name: str) -> Backend:
    """The backend registered as `name` (one instance per process)."""
    if name not in _loaded:
        where = BACKENDS.get(name) or computes.plugins("mltrain.backends").get(name)
        if where is None:
            known = list(BACKENDS) + [n for n in computes.plugins("mltrain.backends") if n not in BACKENDS]
            raise MltrainError(f"unknown backend '{name}' (known: {', '.join(known)})")
        module, _, cls = where.partition(":")
        _loaded[name] = getattr(importlib.import_module(module), cls)()
    return _loaded[name]


def backend_of(record: RunRecord) -> Backend:
    """The backend that runs (ran) a run. Records of 0.1.0 named the process group in `backend`; their
    compute and distribution tell the backend instead."""
    name = record.backend
    if name not in BACKENDS and name not in computes.plugins("mltrain.backends"):
        name = backend_for(record.compute_kind, record.distribution_kind)
    return get(name)


def refresh(records: List[RunRecord], backend_of: Callable[[RunRecord], Backend] = backend_of) -> List[RunRecord]:
    """Bring runs that have not ended up to date, asking each backend once for all of its runs;
    returns those this look saw end."""
    by_backend: Dict[str, Tuple[Backend, List[RunRecord]]] = {}
    for record in records:
        if record.status not in TERMINAL:
            backend = backend_of(record)
            by_backend.setdefault(backend.name, (backend, []))[1].append(record)
    for backend, group in by_backend.values():
        backend.refresh(group)
    return [r for _, group in by_backend.values() for r in group if r.status in TERMINAL]
