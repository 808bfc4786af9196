"""Freezing: one composed config becomes a FrozenJob (mltrain.jobspec.job), or a ConfigError.

Everything that can be checked is checked here, before a run directory exists: the schema's rules
(mltrain.config.validate), the job kind's inputs (mltrain.launch.programs) and what the chosen
backend needs (Backend.check). The backend is chosen here, once, and named in the frozen job.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from mltrain import backends
from mltrain.backends import backend_for
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.config import aliases, validate
from mltrain.config.compose import is_mltrain_config, uses_hydra_resolver
from mltrain.environments import materialize
from mltrain.environments import spec as env_spec
from mltrain.jobspec.computes import compute_from_dict
from mltrain.jobspec.job import HYDRA_TASK_MODULE, FrozenJob, new_run_id
from mltrain.jobspec.kinds import JOB_KINDS
from mltrain.jobspec.schema import distribution_from_dict
from mltrain.launch import nesting, programs
from mltrain.ranks import hangs
from mltrain.runs import mlflow_run


def task_config(sweep_config: DictConfig) -> DictConfig:
    """The job's own config: everything but the `hydra` node."""
    return OmegaConf.masked_copy(sweep_config, [k for k in sweep_config.keys() if k != "hydra"])


def freeze(sweep_config: DictConfig, runs_root: str, sweep_index: Optional[int] = None,
           app_compute: Optional[Dict[str, Any]] = None, shapes: Optional[Dict[str, Any]] = None,
           run_id: Optional[str] = None) -> FrozenJob:
    """Resolve, validate and freeze one composed config. Raises ConfigError on bad input.
    `shapes`: kept across the members of one sweep (see _config_of). `run_id`: the id its driver gave a
    deferred member (mltrain.launch.deferred), instead of a new one."""
    overrides = list(OmegaConf.to_container(sweep_config.hydra.overrides.task))
    sweep_dir = str(OmegaConf.select(sweep_config, "hydra.sweep.dir", default=None) or "") or None
    if sweep_dir is not None:  # `hydra.sweep.dir=seeds`: records (and a packed sweep's queue) outlive this folder
        sweep_dir = os.path.abspath(os.path.expanduser(sweep_dir))
    if not is_mltrain_config(sweep_config):
        # A plain Hydra app: its config may use values only run_job sets (hydra.runtime.output_dir),
        # so it is resolved in the rank, as Hydra's own launchers do.
        plain = OmegaConf.to_container(task_config(sweep_config), resolve=False)
        return _freeze_hydra_app(sweep_config, plain, overrides, runs_root, sweep_dir, sweep_index, app_compute)
    groups = OmegaConf.select(sweep_config, "hydra.runtime.choices", default=None) or {}
    validate.check_added_keys(overrides, groups=list(groups.keys()))
    # Resolve once, with HydraConfig set by the caller, so `${hydra:...}` and `${now:}` work here.
    resolved = {}
    for key in sweep_config.keys():
        if key != "hydra":
            value = sweep_config[key]
            resolved[key] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    cfg = _config_of(resolved, shapes)
    aliases.apply(cfg)
    _absolute_paths(cfg)
    missing = sorted(OmegaConf.missing_keys(cfg)) if _has_missing(resolved) else []
    if missing:
        raise ConfigError(missing[0], f"a value is required (set {missing[0]}=...)")
    validate.validate(cfg)
    return _freeze_mltrain(cfg, overrides, sweep_dir, sweep_index, run_id)


def freeze_member(cfg: DictConfig, runs_root: str, sweep_index: Optional[int] = None,
                  app_compute: Optional[Dict[str, Any]] = None, shapes: Optional[Dict[str, Any]] = None,
                  run_id: Optional[str] = None) -> FrozenJob:
    """`freeze` of a sweep's member, with HydraConfig holding it only where its config reads `${hydra:...}`
    (a copy of the hydra node: not free, 100 times over) and never an earlier member's values. A plain Hydra
    app's config is resolved in its rank: here only its sweep folder is read (5 ms a member, 5 s of a 1,000-member
    sweep, when HydraConfig was set for every one)."""
    plain = not is_mltrain_config(cfg)
    if (uses_hydra_resolver(cfg) if not plain else _sweep_dir_reads_hydra(cfg)):
        HydraConfig.instance().set_config(cfg)
    elif not plain:
        HydraConfig.instance().cfg = None
    return freeze(cfg, runs_root, sweep_index=sweep_index, app_compute=app_compute, shapes=shapes, run_id=run_id)


def _sweep_dir_reads_hydra(cfg: DictConfig) -> bool:
    """Whether a plain app's `hydra.sweep.dir`, as typed, reads `${hydra:...}` (then HydraConfig must hold it)."""
    sweep = OmegaConf.select(cfg, "hydra.sweep", default=None)
    return sweep is not None and "hydra:" in str(OmegaConf.to_container(sweep, resolve=False).get("dir"))


def member_run_id(given: Optional[str], experiment: str, sweep_index: Optional[int]) -> str:
    """A run's id: `run.id` (with the member's index after the first member of a sweep), else the experiment,
    the time and 3 random bytes."""
    if not given:
        return new_run_id(experiment)
    return f"{given}_{sweep_index}" if sweep_index else str(given)


def _config_of(resolved: Dict[str, Any], shapes: Optional[Dict[str, Any]]) -> DictConfig:
    """The resolved values as a DictConfig. OmegaConf.create of a whole job's config costs about 10 ms,
    a second of a 100-member sweep; the members of a sweep differ in a few values, so a later member is
    a copy of the first one's config (unpickled: 0.3 ms) with the values that differ set on it."""
    import pickle  # startup

    if shapes is not None and "first" in shapes:
        first_values, first_bytes = shapes["first"]
        changes = _changes(first_values, resolved, ())
        if changes is not None:
            cfg = pickle.loads(first_bytes)
            for path, value in changes:
                node = cfg
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = value
            return cfg
    cfg = OmegaConf.create(resolved)
    if shapes is not None and "first" not in shapes:
        shapes["first"] = (resolved, pickle.dumps(cfg))
    return cfg


def _changes(old: Any, new: Any, path: tuple) -> Optional[List[tuple]]:
    """The (path, value) pairs that make `old` into `new`: a container whose keys or length differ is
    replaced whole. None when the whole config differs (no copy is worth making)."""
    if type(old) is not type(new):
        return [(path, new)] if path else None
    if isinstance(new, dict):
        if list(old) != list(new):
            return [(path, new)] if path else None
        out: List[tuple] = []
        for key, value in new.items():
            found = _changes(old[key], value, path + (key,))
            if found is None:
                return None
            out += found
        return out
    if isinstance(new, list):
        if len(old) != len(new):
            return [(path, new)]
        out = []
        for i, (a, b) in enumerate(zip(old, new)):
            out += _changes(a, b, path + (i,)) or []
        return out
    return [] if old == new else [(path, new)]


def _has_missing(value: Any) -> bool:
    """Whether a resolved container holds a `???` anywhere: a walk of plain dicts, where asking
    OmegaConf costs milliseconds a member."""
    if isinstance(value, dict):
        return any(_has_missing(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_missing(v) for v in value)
    return value == "???"


#: Keys that name a file or folder on the submitting machine. The ranks run in their run directory, so a
#: relative path is made absolute here, once, against the folder mltrain was started in: the checks
#: before launch and the ranks then read the same path, and run.json records it.
PATH_KEYS = ("data.train_dir", "data.val_dir", "model.weights", "job.untrained_model_dir", "job.model_dir",
             "job.image_dir", "job.input_path", "job.output_path", "job.input_transform_path", "job.input_image_path",
             "job.src_path", "job.tgt_train_path", "job.tgt_test_path", "job.scored_dataset", "job.input_data",
             "job.append_row_to")


def _absolute_paths(cfg) -> None:
    for key in PATH_KEYS:
        value = OmegaConf.select(cfg, key, default=None)
        # "$MLTRAIN_OUTPUTS_DIR/NAME" (a v2 job's output) is the rank's to expand
        if isinstance(value, str) and value and value != "???" and not value.startswith("$"):
            OmegaConf.update(cfg, key, os.path.abspath(os.path.expanduser(value)), force_add=False)


def _freeze_mltrain(cfg, overrides, sweep_dir, sweep_index, given_id: Optional[str] = None) -> FrozenJob:
    backend = backends.get(backend_for(str(cfg.compute.kind), str(cfg.distribution.kind),
                                       cfg.compute.get("login")))
    process_group = backend.check(cfg)
    environment = _resolve_environment(cfg, backend.containers)
    if cfg.distribution.horovod and not environment["containerized"]:
        from mltrain.environments import horovod  # startup

        try:  # the ranks' own interpreter must have a Horovod built with MPI for its torch
            horovod.require(str(cfg.environment.python.interpreter))
        except MltrainError as exc:
            raise ConfigError("distribution.horovod", str(exc)) from None
    experiment = str(cfg.experiment_name)
    run_id = given_id or member_run_id(cfg.run.id, experiment, sweep_index)
    root = Path(os.path.expanduser(str(cfg.run.root))).resolve()
    run_dir = str(root / run_id)
    if os.path.exists(run_dir):
        raise ConfigError("run.id", f"a run already exists at {run_dir}; run directories are never reused")
    program = programs.rank_program(cfg, run_dir)
    compute = compute_from_dict(OmegaConf.to_container(cfg.compute))
    prefix, backend_env = backend.wrap_ranks(compute, environment, run_dir)
    argv = prefix + program.argv
    env = _interpreter_env(cfg, environment)
    env.update({str(k): str(v) for k, v in cfg.environment.environment_variables.items()})
    env.update(_params_env(cfg.job.get("params") or {}))
    env.update(_data_env(cfg))
    env["MLTRAIN_DIST_TIMEOUT_S"] = str(cfg.distribution.timeout_s)
    env["MLTRAIN_PYTHON"] = sys.executable  # mltrain's own interpreter (Run.register_model calls its CLI)
    env.update(nesting.job_variables())  # how deep its ranks run in jobs submitted by jobs' code, and by which files
    env.update(mlflow_run.rank_env(run_dir))  # scripts' mlflow.log_metric lands in this run
    env.update(backend_env)
    env.update({k: v for k, v in hangs.hang_env(process_group, run_dir).items() if k not in env and k not in os.environ})
    if program.snapshot_source is not None:  # the user's own program: a script or a command
        hooks = [_RANK_SITE] if cfg.distribution.close_process_group and cfg.distribution.kind != "none" else []
        env.update(_pythonpath_env(hooks, _azureml_shim()))
    job = FrozenJob(
        run_id=run_id,
        run_dir=run_dir,
        experiment=experiment,
        backend=backend.name,
        compute=compute,
        distribution=distribution_from_dict(OmegaConf.to_container(cfg.distribution)),
        process_group=process_group,
        argv=argv,
        cwd=program.cwd,
        snapshot_source=program.snapshot_source,
        environment=environment,
        detach=bool(cfg.run.detach),
        env=env,
        overrides=overrides,
        console=str(cfg.run.console),
        kill_grace_s=float(cfg.run.kill_grace_s),
        system_metrics_s=float(cfg.run.system_metrics_interval_s) if cfg.run.system_metrics else 0.0,
        hang_timeout_s=_hang_timeout_s(cfg),
        hang_action=str(cfg.run.hang_action),
        sweep_dir=sweep_dir,
        sweep_index=sweep_index,
        config=OmegaConf.to_container(cfg),  # after the environment's interpreter was filled in
    )
    backend.validate(job)
    return job


def _params_env(params: Dict[str, Any]) -> Dict[str, str]:
    """job.params as AML_PARAMETER_<name>; a name no shell can read back is refused, not exported."""
    for name in params:
        if not str(name).isidentifier():
            raise ConfigError(f"job.params.{name}", "not a valid variable name (letters, digits and _; e.g. "
                              f"{''.join(c if c.isalnum() else '_' for c in str(name))}): it is exported as "
                              f"AML_PARAMETER_{name}")
    return {f"AML_PARAMETER_{name}": str(value) for name, value in params.items()}


def _data_env(cfg) -> Dict[str, str]:
    """inputs and outputs as Azure passes them: AZUREML_DATAREFERENCE_<name> (v1's PipelineData and
    DataReference) and AZURE_ML_INPUT_<name> / AZURE_ML_OUTPUT_<name> (v2)."""
    env: Dict[str, str] = {}
    for group, v2 in (("inputs", "AZURE_ML_INPUT_"), ("outputs", "AZURE_ML_OUTPUT_")):
        for name, path in (cfg.get(group) or {}).items():
            if not str(name).isidentifier():
                raise ConfigError(f"{group}.{name}", "not a valid name (letters, digits and _): it is exported as "
                                  f"AZUREML_DATAREFERENCE_{name}")
            env[f"AZUREML_DATAREFERENCE_{name}"] = env[f"{v2}{name}"] = str(path)
    return env


#: mltrain's own folders put on a script rank's PYTHONPATH (shipped inside the package).
_PACKAGE_DIR = Path(__file__).resolve().parent.parent
_RANK_SITE = str(_PACKAGE_DIR / "_rank_site")


def _azureml_shim() -> List[str]:
    """Scripts doing `from azureml.core.run import Run` get mltrain's stand-in, unless the real one exists."""
    try:
        spec = importlib.util.find_spec("azureml.core")
    except ModuleNotFoundError:
        spec = None
    # The stand-ins themselves are on this interpreter's path (mltrain's .pth): finding them is not finding
    # a real azureml-core, and a rank's own environment (a built venv) would not have them.
    real = spec is not None and "_azureml_shim" not in str(spec.origin or "")
    return [] if real else [str(_PACKAGE_DIR / "_azureml_shim")]


def _pythonpath_env(first: List[str], last: List[str]) -> Dict[str, str]:
    """The rank's PYTHONPATH: the exit hook ahead of the user's entries (a sitecustomize is found first
    on the path; it runs the one it shadows), the stand-ins after them (they never shadow anything)."""
    if not first and not last:
        return {}
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": os.pathsep.join(first + ([existing] if existing else []) + last)}


def _interpreter_env(cfg, environment: Dict[str, Any]) -> Dict[str, str]:
    """The environment's interpreter folder first on the ranks' PATH, as an activated venv would be, so
    that `job=command` and anything a script starts by name (python, pip, a console script) run in it.
    Also for mltrain's own interpreter (environment=current): started as `.venv/bin/mltrain` with no
    venv activated, a command's `python` would otherwise be the first one on PATH, the system's."""
    interpreter = str(cfg.environment.python.interpreter or "")
    if environment["containerized"] or not interpreter:
        return {}
    bin_dir = os.path.dirname(interpreter)
    dirs = [bin_dir]
    built = not environment["spec"].get("user_managed")  # mltrain builds a venv (interpreter in <env>/bin)
    if built:
        # The venv sees mltrain's interpreter's packages after its own (materialize: a .pth file), so a
        # requirement they already meet is not installed again, and its console scripts stay in that
        # interpreter's folder: next on PATH (`mldesigner execute`, the command of mldesigner's components).
        dirs.append(os.path.dirname(sys.executable))
    env = {"PATH": os.pathsep.join(p for p in (*dirs, os.environ.get("PATH", "")) if p)}
    if built:
        env["VIRTUAL_ENV"] = os.path.dirname(bin_dir)
    return env


def _resolve_environment(cfg, backend_runs_containers: bool) -> Dict[str, Any]:
    """The spec, checked now: pins impossible here or a user-managed mismatch stop the run before it queues."""
    spec = env_spec.from_config(OmegaConf.to_container(cfg.environment))
    containerized = bool(spec.base_image) and backend_runs_containers
    if not containerized and not spec.user_managed:
        materialize.check_buildable(spec)
    if not containerized and spec.user_managed:
        materialize.check_user_managed(spec, str(cfg.environment.check))
    cfg.environment.python.interpreter = materialize.interpreter_for(spec, containerized)
    return {"spec": spec.to_json(), "containerized": containerized, "check": str(cfg.environment.check)}


def _freeze_hydra_app(sweep_config, resolved, overrides, runs_root, sweep_dir, sweep_index, app_compute) -> FrozenJob:
    """Any Hydra app can use this launcher; its ranks run the task function via run_job."""
    compute = compute_from_dict(dict(app_compute or {}), key="hydra.launcher.compute")
    name = str(OmegaConf.select(sweep_config, "hydra.job.name", default="app"))
    run_id = new_run_id(name)
    return FrozenJob(
        run_id=run_id,
        run_dir=str(Path(os.path.expanduser(runs_root)).resolve() / run_id),
        experiment=name,
        backend=backend_for(compute.kind, "none"),
        compute=compute,
        distribution=distribution_from_dict({"kind": "none"}),
        process_group=None,
        argv=[sys.executable, "-m", HYDRA_TASK_MODULE],
        cwd=os.getcwd(),
        env=nesting.job_variables(),
        overrides=overrides,
        sweep_dir=sweep_dir,
        sweep_index=sweep_index,
        config=resolved,
    )


#: run.hang_timeout_min unset: the built-in components print and log as they go, so 30 minutes of silence is a
#: hang; a user's script or command may rightly be silent for hours, so it is watched only when asked.
BUILTIN_HANG_TIMEOUT_MIN = 30.0


def _hang_timeout_s(cfg: Any) -> float:
    given = cfg.run.get("hang_timeout_min")
    if given is None:
        kind = JOB_KINDS.get(str(cfg.job.kind))
        return BUILTIN_HANG_TIMEOUT_MIN * 60 if kind is not None and kind.builtin else 0.0
    return float(given) * 60
