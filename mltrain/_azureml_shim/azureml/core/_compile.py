"""v1 job objects compiled into mltrain's typed request (mltrain.launch.request.Request).

Every v1 front door (ScriptRunConfig, the estimators, the pipeline steps, HyperDrive's run config)
ends here: one function turns (source folder, script or command, arguments, compute target,
environment, distribution) into the choices of mltrain's config groups (`compute=`, `environment=`,
`distribution=`, the job kind) and typed values composed over them (Request.values: an in-memory config
node, no override text), so a v1 submission and the equivalent `mltrain job=script ...` command make the same
job.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from azureml.exceptions import ComputeTargetException, UserErrorException

from mltrain.config.paths import shipped_options


@dataclass
class V1Job:
    source_directory: str
    script: Optional[str] = None
    command: Optional[Any] = None
    arguments: List[Any] = field(default_factory=list)
    compute_target: Any = None
    environment: Any = None
    distribution: Any = None
    params: Dict[str, Any] = field(default_factory=dict)
    values: Dict[str, Any] = field(default_factory=dict)  # values the caller adds (estimator keys), nested
    parallel: Optional[Dict[str, Any]] = None  # a ParallelRunStep's job=parallel fields


def argument_text(value: Any, paths: Optional[Dict[int, str]] = None) -> Any:
    """An argument as the script receives it: numbers as Azure passes them (text), data references as
    their local path."""
    to_path = getattr(value, "_mltrain_path", None)
    if to_path is not None:
        return to_path()
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return str(value)
    return str(value)


def compute_overrides(target: Any, workspace: Any) -> Tuple[List[str], Tuple[str, ...]]:
    """(`compute=` override, config folders) for a compute target given as an object or a name: a pipeline step's
    entry (azureml.pipeline.steps)."""
    name, dirs = compute_choice(target, workspace)
    return [f"compute={name}"], dirs


def compute_choice(target: Any, workspace: Any) -> Tuple[str, Tuple[str, ...]]:
    """(the `compute` option, config folders) for a compute target given as an object or a name."""
    dirs = workspace.config_dirs() if workspace is not None else ()
    if target is None or target == "local":
        return "local", dirs
    name = getattr(target, "name", None) or str(target)
    if name in shipped_options("compute"):  # mltrain's own presets, by name
        return name, dirs
    if workspace is None or not (workspace.config_dir / "compute" / f"{name}.yaml").is_file():
        where = workspace.config_dir / "compute" if workspace is not None else ".mltrain/compute"
        raise ComputeTargetException(f"ComputeTargetNotFound: Compute Target with name {name} not found in "
                                     f"provided workspace (mltrain: no {where}/{name}.yaml)")
    return name, dirs


def environment_choice(environment: Any) -> Tuple[str, Dict[str, Any]]:
    """(the `environment=` option, the values over it) of a v1 Environment; none: Azure's default, this
    interpreter here."""
    if environment is None:
        return "current", {}
    option, values = environment.to_mltrain()
    return str(option), dict(values)


def distribution_choice(config: Any) -> Tuple[str, Dict[str, Any]]:
    """(the `distribution=` option, the values over it) of a v1 distributed configuration."""
    if config is None:
        return "none", {}
    values = dict(config.to_mltrain())
    return str(values.pop("kind")), values


def request(job: V1Job, experiment: Any, origin: Dict[str, Any]) -> Any:
    from mltrain.launch.request import Request, merge_values  # submission

    folder = os.path.abspath(job.source_directory or ".")
    if not os.path.isdir(folder):
        raise UserErrorException(f"source_directory '{job.source_directory}' does not exist ({folder})")
    arguments = [argument_text(a) for a in job.arguments]
    if job.parallel is not None:
        return _parallel_request(job, folder, arguments, experiment, origin)
    if job.command is not None:
        command = job.command if isinstance(job.command, str) else command_line(job.command)
        if arguments:
            command += " " + " ".join(_shell_word(a) for a in arguments)
        kind, fields = "command", {"source_directory": folder, "command": command}
    else:
        if not job.script:
            raise UserErrorException("ScriptRunConfig needs script= or command=")
        kind, fields = "script", {"source_directory": folder, "script": job.script, "arguments": arguments}
    if job.params:  # job.params' keys are the user's: a mapping composed over the kind's
        fields["params"] = {str(key): value if isinstance(value, (int, float, str, bool)) else argument_text(value)
                            for key, value in job.params.items()}
    workspace = getattr(experiment, "workspace", None)
    compute, dirs = compute_choice(job.compute_target, workspace)
    environment, env_values = environment_choice(job.environment)
    distribution, dist_values = distribution_choice(job.distribution)
    values = merge_values({"job": fields, "environment": env_values, "distribution": dist_values}, job.values)
    return Request(job=kind, groups={"compute": compute, "environment": environment, "distribution": distribution},
                   values=_without_empty(values), config_dirs=dirs, experiment_name=experiment.name, origin=origin)


def _parallel_request(job: V1Job, folder: str, arguments: List[Any], experiment: Any, origin: Dict[str, Any]) -> Any:
    """A ParallelRunStep's job: job=parallel with its configuration's fields, one agent per node."""
    from mltrain.launch.request import Request, merge_values  # submission

    fields = dict(job.parallel or {})
    nodes = fields.pop("node_count", 1)
    variables = fields.pop("environment_variables", {})
    workspace = getattr(experiment, "workspace", None)
    compute, dirs = compute_choice(job.compute_target, workspace)
    environment, env_values = environment_choice(job.environment)
    values = merge_values({"job": {"source_directory": folder, "program_arguments": [str(a) for a in arguments],
                                   **fields},
                           "environment": merge_values(env_values, {"environment_variables": dict(variables)}),
                           "distribution": {"node_count": nodes}}, job.values)
    return Request(job="parallel", groups={"compute": compute, "environment": environment, "distribution": "none"},
                   values=_without_empty(values), config_dirs=dirs, experiment_name=experiment.name, origin=origin)


def _without_empty(values: Dict[str, Any]) -> Dict[str, Any]:
    """The top-level sections that hold something (an empty mapping would still open a section)."""
    return {key: value for key, value in values.items() if value != {}}


def command_line(items: Any) -> str:
    """A list command as Azure joins it: each string as written, so one item may hold several words and shell
    syntax (`['python train.py --epochs 30']`, `["python -m torch.distributed.launch ... --data-dir", ds, ...]`);
    a data reference or a number as one word (its local path, its text)."""
    return " ".join(a if isinstance(a, str) else _shell_word(a) for a in items)


def _shell_word(value: Any) -> str:
    text = str(argument_text(value))
    return text if text.startswith("$") and text[1:].replace("_", "").isalnum() else shlex.quote(text)


def submit(job: V1Job, experiment: Any, origin: Dict[str, Any], tags: Optional[Dict[str, str]] = None) -> Any:
    """Queue the job; the v1 Run handle, once its run exists."""
    from azureml.core.run import Run

    from mltrain.base.errors import MltrainError  # submission
    from mltrain.python_api.api import submit_request  # submission
    from mltrain.runs.console import Console, Silent  # submission

    req = request(job, experiment, origin)
    try:
        handle = submit_request(req, console=Console(stream=Silent()))  # Azure's submit prints nothing
    except MltrainError as exc:
        raise UserErrorException(str(exc)) from None
    run = Run(experiment, _handle=handle)
    if tags:
        run.set_tags(dict(tags))
    return run
