"""Rules a composed config must satisfy before anything is queued (SPEC section 3).

Types and unknown keys are caught by the dataclass schemas while composing; these are the range and
cross-group rules a schema cannot express. Each failure is a ConfigError naming the key and what is
allowed.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Tuple

from omegaconf import OmegaConf

from mltrain.errors import ConfigError

# (key, test, text of what is allowed)
RANGE_RULES: Tuple[Tuple[str, Callable[[Any], bool], str], ...] = (
    ("trainer.epochs", lambda v: v > 0, "> 0"),
    ("trainer.batch_size", lambda v: v > 0, "> 0"),
    ("trainer.warmup_epochs", lambda v: v >= 0, ">= 0"),
    ("trainer.learning_rate", lambda v: v > 0, "> 0"),
    ("trainer.patience", lambda v: v > 0, "> 0"),
    ("trainer.print_frequency", lambda v: v > 0, "> 0"),
    ("distribution.node_count", lambda v: v >= 1, ">= 1"),
    ("distribution.process_count_per_node", lambda v: v >= 1, ">= 1"),
    ("distribution.timeout_s", lambda v: v > 0, "> 0"),
    ("compute.max_concurrent_jobs", lambda v: v >= 1, ">= 1"),
    ("compute.gpus_per_node", lambda v: v >= 0, ">= 0"),
    ("compute.cpus_per_task", lambda v: v >= 1, ">= 1"),
    ("compute.timeout_min", lambda v: v >= 1, ">= 1"),
    ("compute.array_parallelism", lambda v: v >= 1, ">= 1"),
    ("compute.max_requeues", lambda v: v >= 0, ">= 0"),
    ("data.image_size", lambda v: v >= 8, ">= 8"),
    ("data.num_workers", lambda v: v >= 0, ">= 0"),
    ("data.min_crop_scale", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("run.kill_grace_s", lambda v: v >= 0, ">= 0"),
)

CHOICES = {
    "distribution.kind": ("none", "pytorch", "mpi"),
    "distribution.slurm_mpi": ("pmix", "pmi2", "pmix_v3", "pmix_v4", "none"),
    "distribution.backend": ("auto", "gloo", "nccl"),
    "compute.kind": ("local", "slurm"),
    "data.kind": ("sample", "image_directory"),
    "run.console": ("rank0", "all", "none"),
    "environment.check": ("error", "warn"),
    "compute.container_runtime": ("pyxis", "apptainer"),
}


def visible_gpus() -> int:
    """GPUs this machine shows to a process, without importing torch (the CLI must stay light)."""
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask is not None and mask.strip() in ("", "-1", "none", "NoDevFiles"):
        return 0
    try:
        count = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    if mask is not None:
        count = min(count, len([d for d in mask.split(",") if d.strip()]))
    return count


def job_gpus(cfg: Any) -> int:
    """GPUs each node of the job will have: the cluster's request, or what this machine shows."""
    if cfg.compute.kind == "slurm":
        return int(cfg.compute.gpus_per_node)
    cap = cfg.compute.get("gpus")
    return visible_gpus() if cap is None else min(int(cap), visible_gpus())


def resolve_backend(cfg: Any) -> str | None:
    """The process-group backend the ranks will use (None when there is no process group)."""
    if cfg.distribution.kind == "none":
        return None
    backend = str(cfg.distribution.backend)
    if backend == "auto":
        return "nccl" if job_gpus(cfg) > 0 else "gloo"
    return backend


def check_known_keys(cfg: Any) -> None:
    """Keys forced in with `+key=...` bypass the schemas while composing; they are refused here."""
    import dataclasses

    from mltrain.schema import SCHEMAS

    for group, options in SCHEMAS.items():
        node = cfg.get(group)
        if node is None:
            continue
        schema = options.get(str(node.get("kind"))) if len(options) > 1 else next(iter(options.values()))
        if schema is None:
            continue
        allowed = [f.name for f in dataclasses.fields(schema)]
        for key in node.keys():
            if key not in allowed:
                raise ConfigError(f"{group}.{key}", "unknown key", allowed)


def validate(cfg: Any) -> None:
    check_known_keys(cfg)
    for key, choices in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value is not None and value not in choices:
            raise ConfigError(key, f"'{value}' is not supported", choices)
    for key, test, allowed in RANGE_RULES:
        value = OmegaConf.select(cfg, key)
        if value is not None and not test(value):
            raise ConfigError(key, f"{value} is invalid; must be {allowed}")
    dist = cfg.distribution
    if dist.kind == "none" and dist.node_count * dist.process_count_per_node > 1:
        key = "distribution.process_count_per_node" if dist.process_count_per_node > 1 else "distribution.node_count"
        raise ConfigError(
            key,
            "distribution=none runs a single process; use distribution=pytorch for "
            f"{dist.node_count}x{dist.process_count_per_node} ranks",
        )
    if dist.node_count > 1 and cfg.compute.kind == "local":
        raise ConfigError(
            "distribution.node_count",
            f"{dist.node_count} nodes need a cluster; compute=local runs on one node (use node_count=1 "
            "and raise process_count_per_node)",
        )
    if resolve_backend(cfg) == "nccl" and job_gpus(cfg) == 0:
        where = "compute.gpus_per_node is 0" if cfg.compute.kind == "slurm" else "none is visible here"
        raise ConfigError("distribution.backend", f"nccl needs GPUs and {where}", ("gloo", "auto"))
    max_nodes = OmegaConf.select(cfg, "compute.max_nodes")
    if max_nodes is not None and dist.node_count > max_nodes:
        raise ConfigError("distribution.node_count", f"{dist.node_count} exceeds compute.max_nodes={max_nodes}")
    if cfg.run.detach and cfg.compute.kind != "slurm":
        raise ConfigError("run.detach", "only compute=slurm runs can be detached (use mltrain.submit() for a "
                          "local run in the background)")
    if dist.kind == "mpi":
        _validate_mpi(cfg)
    gpus = OmegaConf.select(cfg, "compute.gpus")
    if gpus is not None and gpus < 0:
        raise ConfigError("compute.gpus", f"{gpus} is invalid; must be >= 0 or null")


def _validate_mpi(cfg: Any) -> None:
    import importlib.util
    import shutil

    dist = cfg.distribution
    if cfg.compute.kind == "local":
        if shutil.which("mpirun") is None:
            raise ConfigError("distribution", "distribution=mpi needs Open MPI's `mpirun` on PATH; install it with "
                              "`apt-get install openmpi-bin` (Debian/Ubuntu) or your cluster's MPI module")
        gpus = visible_gpus()
        limit, what = (gpus, "GPUs") if gpus else (os.cpu_count() or 1, "CPUs")
        if dist.process_count_per_node > limit and not dist.oversubscribe:
            raise ConfigError("distribution.process_count_per_node",
                              f"{dist.process_count_per_node} ranks but this machine has {limit} {what}; "
                              "set distribution.oversubscribe=true to allow it")
    if dist.horovod:
        try:
            found = importlib.util.find_spec("horovod.torch") is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise ConfigError("distribution.horovod", "true, but Horovod is not installed; install it with "
                              "`pip install 'mltrain[horovod]'` (Horovod 0.28.1 builds only against torch < 2.1)")
