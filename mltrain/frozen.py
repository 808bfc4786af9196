"""The frozen job: everything a backend needs to start the ranks, decided once at submission.

config (DictConfig) --freeze()--> FrozenJob --launcher--> ranks --> run record.

Freezing resolves every interpolation (`${now:}` included) exactly once; the resolved config is
written to the run directory and every rank, requeue and rerun reads that copy (hydra #2070).
Building a FrozenJob starts nothing, so a dry run is free.
"""
from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from mltrain.errors import ConfigError

if TYPE_CHECKING:
    from omegaconf import DictConfig

# omegaconf and the validation modules are imported inside the functions that freeze: a rank on a
# cluster node only loads a FrozenJob, and every import there delays the start of the job.

#: The rank program of a plain Hydra app using this launcher: it unpickles the task function.
HYDRA_TASK_MODULE = "mltrain.hydra_task"


@dataclass(frozen=True)
class FrozenJob:
    run_id: str
    run_dir: str
    experiment: str
    compute: str
    distribution: str
    backend: Optional[str]
    node_count: int
    process_count_per_node: int
    argv: List[str]
    cwd: str
    # Job-level variables every rank gets on top of the rank contract (params, environment, MLTRAIN_*).
    env: Dict[str, str]
    overrides: List[str]
    console: str = "rank0"
    kill_grace_s: float = 5.0
    max_concurrent_jobs: int = 1
    sweep_dir: Optional[str] = None
    sweep_index: Optional[int] = None
    snapshot_source: Optional[str] = None
    # The resolved `compute` node (cluster parameters) and whether to return right after submission.
    compute_params: Dict[str, Any] = field(default_factory=dict)
    detach: bool = False
    # The resolved environment spec, and whether the ranks run in its docker image (on a cluster).
    environment: Dict[str, Any] = field(default_factory=dict)
    # The resolved config (no `hydra` node), as written to config.yaml.
    config: Dict[str, Any] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return self.node_count * self.process_count_per_node

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def load(cls, run_dir: str | Path) -> "FrozenJob":
        with open(Path(run_dir) / "job.json", encoding="utf-8") as f:
            return cls(**json.load(f))


def new_run_id(experiment: str) -> str:
    stamp = time.strftime("%Y%m%d_%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in experiment) or "run"
    return f"{safe}_{stamp}_{secrets.token_hex(3)}"


def task_config(sweep_config: "DictConfig") -> "DictConfig":
    """The job's own config: everything but the `hydra` node."""
    from omegaconf import OmegaConf

    return OmegaConf.masked_copy(sweep_config, [k for k in sweep_config.keys() if k != "hydra"])


def _params_env(params: Any) -> Dict[str, str]:
    return {f"AML_PARAMETER_{name}": str(value) for name, value in (params or {}).items()}


def is_mltrain_config(cfg: "DictConfig") -> bool:
    return all(k in cfg for k in ("job", "compute", "distribution", "run"))


def freeze(sweep_config: "DictConfig", runs_root: str, sweep_index: Optional[int] = None,
           app_compute: Optional[Dict[str, Any]] = None) -> FrozenJob:
    """Resolve, validate and freeze one composed config. Raises ConfigError on bad input."""
    from omegaconf import OmegaConf

    from mltrain import aliases, validate
    overrides = list(OmegaConf.to_container(sweep_config.hydra.overrides.task))
    sweep_dir = str(OmegaConf.select(sweep_config, "hydra.sweep.dir", default=None) or "") or None
    if not is_mltrain_config(sweep_config):
        # A plain Hydra app: its config may use values only run_job sets (hydra.runtime.output_dir),
        # so it is resolved in the rank, as Hydra's own launchers do.
        plain = OmegaConf.to_container(task_config(sweep_config), resolve=False)
        return _freeze_hydra_app(sweep_config, plain, overrides, runs_root, sweep_dir, sweep_index, app_compute)
    # Resolve once, with HydraConfig set by the caller, so `${hydra:...}` and `${now:}` work here.
    resolved = {}
    for key in sweep_config.keys():
        if key != "hydra":
            value = sweep_config[key]
            resolved[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    plain = OmegaConf.create(resolved)
    aliases.apply(plain)
    missing = sorted(OmegaConf.missing_keys(plain))
    if missing:
        raise ConfigError(missing[0], f"a value is required (set {missing[0]}=...)")
    validate.validate(plain)
    return _freeze_mltrain(plain, overrides, sweep_dir, sweep_index)


def _azureml_shim_env() -> Dict[str, str]:
    """Scripts doing `from azureml.core.run import Run` get mltrain's stand-in, unless the real one exists."""
    import importlib.util

    try:
        real = importlib.util.find_spec("azureml.core") is not None
    except ModuleNotFoundError:
        real = False
    if real:
        return {}
    shim = str(Path(__file__).resolve().parent / "_azureml_shim")
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(p for p in (existing, shim) if p)}


def _resolve_environment(cfg) -> Dict[str, Any]:
    """The spec, checked now: pins impossible here or a user-managed mismatch stop the run before it queues."""
    from omegaconf import OmegaConf

    from mltrain.environments import materialize, spec as env_spec

    spec = env_spec.from_config(OmegaConf.to_container(cfg.environment))
    containerized = bool(spec.base_image) and cfg.compute.kind == "slurm"
    if not containerized and not spec.user_managed:
        materialize.check_buildable(spec)
    if not containerized and spec.user_managed:
        materialize.check_user_managed(spec, str(cfg.environment.check))
    cfg.environment.python.interpreter = materialize.interpreter_for(spec, containerized)
    return {"spec": spec.to_json(), "containerized": containerized, "check": str(cfg.environment.check)}


def _container_prefix(cfg, environment: Dict[str, Any], run_dir: str) -> List[str]:
    """apptainer runs the rank program inside the image; pyxis is given to srun instead (mltrain.slurm)."""
    if not environment["containerized"] or cfg.compute.get("container_runtime") != "apptainer":
        return []
    from mltrain.configpath import mltrain_home

    binds = ",".join(sorted({str(Path(run_dir).parent), str(mltrain_home())}))
    gpu = ["--nv"] if cfg.compute.get("gpus_per_node") else []
    return ["apptainer", "exec", *gpu, "--bind", binds, f"docker://{environment['spec']['base_image']}"]


def _freeze_mltrain(cfg, overrides, sweep_dir, sweep_index) -> FrozenJob:
    from omegaconf import OmegaConf

    from mltrain import jobs, validate

    environment = _resolve_environment(cfg)
    experiment = str(cfg.experiment_name)
    run_id = new_run_id(experiment) if not cfg.run.id else str(cfg.run.id)
    if cfg.run.id and sweep_index:
        run_id = f"{run_id}_{sweep_index}"
    root = Path(os.path.expanduser(str(cfg.run.root))).resolve()
    run_dir = str(root / run_id)
    program = jobs.rank_program(cfg, run_dir)
    argv = _container_prefix(cfg, environment, run_dir) + program.argv
    env = {str(k): str(v) for k, v in cfg.environment.environment_variables.items()}
    env.update(_params_env(cfg.job.get("params")))
    env["MLTRAIN_DIST_TIMEOUT_S"] = str(cfg.distribution.timeout_s)
    if cfg.compute.kind == "local" and cfg.compute.get("gpus") is not None:
        # compute.gpus caps the GPUs the ranks see: the first N of those visible to mltrain
        visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
        devices = visible or [str(i) for i in range(validate.visible_gpus())]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices[: int(cfg.compute.gpus)])
    if program.snapshot_source is not None:
        env.update(_azureml_shim_env())
    return FrozenJob(
        run_id=run_id,
        run_dir=run_dir,
        experiment=experiment,
        compute=str(cfg.compute.kind),
        distribution=str(cfg.distribution.kind),
        backend=validate.resolve_backend(cfg),
        node_count=int(cfg.distribution.node_count),
        process_count_per_node=int(cfg.distribution.process_count_per_node),
        argv=argv,
        cwd=program.cwd,
        snapshot_source=program.snapshot_source,
        compute_params=OmegaConf.to_container(cfg.compute),
        environment=environment,
        detach=bool(cfg.run.detach),
        env=env,
        overrides=overrides,
        console=str(cfg.run.console),
        kill_grace_s=float(cfg.run.kill_grace_s),
        max_concurrent_jobs=int(cfg.compute.get("max_concurrent_jobs", 1)),
        sweep_dir=sweep_dir,
        sweep_index=sweep_index,
        config=OmegaConf.to_container(cfg),  # after the environment's interpreter was filled in
    )


def _freeze_hydra_app(sweep_config, resolved, overrides, runs_root, sweep_dir, sweep_index, app_compute) -> FrozenJob:
    """Any Hydra app can use this launcher; its ranks run the task function via run_job."""
    from omegaconf import OmegaConf

    compute = dict(app_compute or {"kind": "local"})
    import sys

    name = str(OmegaConf.select(sweep_config, "hydra.job.name", default="app"))
    run_id = new_run_id(name)
    run_dir = str(Path(os.path.expanduser(runs_root)).resolve() / run_id)
    return FrozenJob(
        run_id=run_id,
        run_dir=run_dir,
        experiment=name,
        compute=str(compute.get("kind", "local")),
        compute_params=compute,
        distribution="none",
        backend=None,
        node_count=1,
        process_count_per_node=1,
        argv=[sys.executable, "-m", HYDRA_TASK_MODULE],
        cwd=os.getcwd(),
        env={},
        overrides=overrides,
        sweep_dir=sweep_dir,
        sweep_index=sweep_index,
        config=resolved,
    )
