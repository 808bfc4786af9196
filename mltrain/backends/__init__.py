"""Backends: what starts a frozen job's ranks, watches them and stops them.

Each backend is a package owning its driver side and its rank side (local: processes on this
machine; mpi: one `mpirun` on this machine; slurm: a Slurm job through submitit). They are found in
one table and imported only when used, as TorchX does with its schedulers, so composing a config
or printing help never loads a backend.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Dict

if TYPE_CHECKING:
    from mltrain.backends.base import Backend

#: backend name (FrozenJob.backend) -> "module:class"
BACKENDS: Dict[str, str] = {
    "local": "mltrain.backends.local.backend:LocalBackend",
    "mpi": "mltrain.backends.mpi.backend:MpiBackend",
    "slurm": "mltrain.backends.slurm.backend:SlurmBackend",
}

_loaded: Dict[str, Backend] = {}


def get(name: str) -> Backend:
    """The backend registered as `name` (one instance per process)."""
    if name not in _loaded:
        if name not in BACKENDS:
            from mltrain.errors import MltrainError

            raise MltrainError(f"unknown backend '{name}' (known: {', '.join(BACKENDS)})")
        module, _, cls = BACKENDS[name].partition(":")
        _loaded[name] = getattr(importlib.import_module(module), cls)()
    return _loaded[name]
