"""Azure ML v1 estimator parameters accepted on `job=script`, mapped onto mltrain's own keys.

Applied to the resolved config before validation, so the rest of mltrain only sees mltrain keys.
A parameter that does not map cleanly is not accepted: the schema rejects it as an unknown key.
`use_gpu: true` is checked by the backend (a local run needs a visible GPU).
"""
from __future__ import annotations

from typing import Any, List

from omegaconf import DictConfig, OmegaConf, open_dict

from mltrain.base.errors import ConfigError


def _flatten_script_params(params: Any) -> List[str]:
    """{'--lr': 0.1, '--verbose': None} -> ['--lr', '0.1', '--verbose'] (the estimator's order)."""
    out: List[str] = []
    for key, value in params.items():
        out.append(str(key))
        if value is None or value is True or value == "":
            continue
        out.append(str(value))
    return out


def apply(cfg: DictConfig) -> None:
    job = cfg.job
    if job.get("kind") != "script":
        return
    with open_dict(cfg):
        if job.get("entry_script"):
            if job.get("script") not in (None, "???", job.entry_script) and not OmegaConf.is_missing(job, "script"):
                raise ConfigError("job.entry_script", f"'{job.entry_script}' conflicts with job.script='{job.script}'; set one")
            job.script = job.entry_script
        if job.get("script_params"):
            job.arguments = list(job.arguments) + _flatten_script_params(job.script_params)
        if job.get("pip_packages"):
            current = cfg.environment.pip if isinstance(cfg.environment.pip, (list,)) or OmegaConf.is_list(cfg.environment.pip) else []
            cfg.environment.pip = list(current) + list(job.pip_packages)
        if job.get("conda_packages"):
            conda = OmegaConf.to_container(cfg.environment.conda) if OmegaConf.is_dict(cfg.environment.conda) else {}
            conda.setdefault("dependencies", []).extend(list(job.conda_packages))
            cfg.environment.conda = conda
        backend = job.get("distributed_backend")
        if backend:
            backend = str(backend).lower()
            if backend == "mpi":
                cfg.distribution.kind = "mpi"
            elif backend in ("nccl", "gloo"):
                cfg.distribution.kind, cfg.distribution.backend = "pytorch", backend
            else:
                raise ConfigError("job.distributed_backend", f"'{backend}' is not supported", ("mpi", "nccl", "gloo"))
        if job.get("use_gpu") is False and cfg.distribution.backend == "auto":
            cfg.distribution.backend = "gloo"
