"""Rules a composed config must satisfy before anything is queued (SPEC section 3).

Types and unknown keys are caught by the dataclass schemas while composing; these are the range and
cross-group rules a schema cannot express. What a backend needs (mpirun on PATH, a cluster for several
nodes, GPUs for nccl) is checked by that backend (Backend.check). Each failure is a ConfigError naming
the key and what is allowed.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Collection, List, Tuple

from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from mltrain.base.errors import ConfigError, first_line
from mltrain.jobspec import computes
from mltrain.jobspec.kinds import SECTIONS, schemas
from mltrain.jobspec.schema import MltrainConf

# (key, test, text of what is allowed)
RANGE_RULES: Tuple[Tuple[str, Callable[[Any], bool], str], ...] = (
    ("trainer.epochs", lambda v: v > 0, "> 0"),
    ("trainer.batch_size", lambda v: v > 0, "> 0"),
    ("trainer.warmup_epochs", lambda v: v >= 0, ">= 0"),
    ("trainer.learning_rate", lambda v: v > 0, "> 0"),
    ("trainer.patience", lambda v: v > 0, "> 0"),
    ("trainer.print_frequency", lambda v: v > 0, "> 0"),
    ("trainer.keep_checkpoints", lambda v: v >= 0, ">= 0 (0 keeps every epoch's checkpoint)"),
    ("distribution.node_count", lambda v: v >= 1, ">= 1"),
    ("distribution.process_count_per_node", lambda v: v >= 1, ">= 1"),
    ("distribution.timeout_s", lambda v: v > 0, "> 0"),
    ("compute.max_concurrent_jobs", lambda v: v >= 1, ">= 1"),
    ("compute.gpus_per_node", lambda v: v >= 0, ">= 0"),
    ("compute.cpus_per_task", lambda v: v >= 1, ">= 1"),
    ("compute.timeout_min", lambda v: v >= 1, ">= 1"),
    ("compute.array_parallelism", lambda v: v >= 1, ">= 1"),
    ("compute.max_requeues", lambda v: v >= 0, ">= 0"),
    ("compute.max_node_failures", lambda v: v >= 0, ">= 0"),
    ("data.image_size", lambda v: v >= 8, ">= 8"),
    ("data.num_workers", lambda v: v >= 0, ">= 0"),
    ("data.min_crop_scale", lambda v: 0 < v <= 1, "in (0, 1]"),
    ("run.kill_grace_s", lambda v: v >= 0, ">= 0"),
    ("run.system_metrics_interval_s", lambda v: v > 0, "> 0"),
    ("run.hang_timeout_min", lambda v: v >= 0, ">= 0 (0: off) or null"),
    ("compute.gpus", lambda v: v >= 0, ">= 0 or null"),
    ("compute.gpus_per_task", lambda v: v >= 1, ">= 1 or null"),
)

CHOICES = {
    "distribution.kind": ("none", "pytorch", "mpi"),
    "distribution.slurm_mpi": ("pmix", "pmi2", "pmix_v3", "pmix_v4", "none"),
    "distribution.backend": ("auto", "gloo", "nccl"),
    "data.kind": ("sample", "image_directory"),
    "trainer.input": ("auto", "cpu", "gpu"),
    "run.console": ("rank0", "all", "none"),
    "run.hang_action": ("fail", "requeue"),
    "environment.check": ("error", "warn"),
    "compute.container_runtime": ("pyxis", "apptainer"),
}


def check_known_keys(cfg: Any) -> None:
    """Keys forced in with `+key=...` bypass the schemas while composing; they are refused here, as is a
    top-level key neither the root schema nor a job kind's section declares (the root takes new keys while
    composing, so that a kind's preset can add its sections)."""
    declared = [f.name for f in dataclasses.fields(MltrainConf)] + list(SECTIONS)
    for key in cfg.keys():
        if key not in declared and key != "hydra":
            close = difflib.get_close_matches(str(key), declared, n=1, cutoff=0.5)
            raise ConfigError(str(key), "unknown key" + (f"; did you mean {close[0]}?" if close else ""), declared)
    for group, options in schemas().items():
        node = cfg.get(group)
        if node is None:
            continue
        if group == "compute":  # a backend's own kind: built in, or an installed package's (mltrain.jobspec.computes)
            schema = _compute_schema(node)
        else:
            schema = options.get(str(node.get("kind"))) if len(options) > 1 else next(iter(options.values()))
        if schema is None:
            continue
        allowed = [f.name for f in dataclasses.fields(schema)]
        for key in node.keys():
            if key not in allowed:
                raise ConfigError(f"{group}.{key}", "unknown key", allowed)
        if group in SECTIONS or (group == "compute" and str(node.get("kind")) not in computes.COMPUTES):
            _check_types(group, node, schema)


def _compute_schema(node: Any) -> type:
    kind = str(node.get("kind"))
    schema = computes.compute_schema(kind)
    if schema is None:
        raise ConfigError("compute.kind", f"'{kind}' is not supported", computes.compute_kinds())
    return schema


def _check_types(group: str, node: Any, schema: type) -> None:
    """A section a job got from values alone (`++trainer.epochs=2`, see mltrain.config.sections) or from a
    preset of the user's own that names no schema was not typed while composing: its values are checked here."""
    try:
        OmegaConf.merge(OmegaConf.structured(schema), node)
    except ValidationError as exc:
        raise ConfigError(f"{group}.{exc.key}", first_line(str(exc.msg))) from None


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
    # A parallel job's instances are agents with no process group between them (they meet in the run's folder)
    instances = dist.kind == "none" and OmegaConf.select(cfg, "job.kind") == "parallel" and dist.process_count_per_node == 1
    if dist.kind == "none" and dist.node_count * dist.process_count_per_node > 1 and not instances:
        key = "distribution.process_count_per_node" if dist.process_count_per_node > 1 else "distribution.node_count"
        raise ConfigError(
            key,
            "distribution=none runs a single process; use distribution=pytorch for "
            f"{dist.node_count}x{dist.process_count_per_node} ranks",
        )
    if dist.horovod and dist.kind != "mpi":
        raise ConfigError("distribution.horovod", "true needs distribution=mpi (Horovod runs over MPI, as "
                          "Azure ML's MpiConfiguration)")
    if dist.tf_config and dist.kind == "mpi":
        raise ConfigError("distribution.tf_config", "true needs distribution=pytorch or none (TensorFlow's workers "
                          "are started as mltrain's ranks, not by mpirun)")


def check_added_keys(overrides: List[str], groups: Collection[str] = ()) -> None:
    """`+key=...` adds a key Hydra would otherwise refuse; a top-level one the schema does not declare
    is refused here like a group key (keys added inside groups are caught by check_known_keys).
    `+group=option` adds a config group (e.g. an experiment) and is Hydra's to check."""
    declared = [f.name for f in dataclasses.fields(MltrainConf)] + list(SECTIONS)
    for override in overrides:
        if not override.startswith("+"):
            continue
        key = override.lstrip("+").split("=", 1)[0].strip()
        top = key.split(".", 1)[0].split("@", 1)[0]
        if top in declared or top in groups or top == "hydra" or "/" in top:
            continue
        close = difflib.get_close_matches(top, declared, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(key, f"unknown key{hint}", declared)
