"""v1 job objects compiled into mltrain's typed job request (mltrain.launch.request.JobRequest).

Every v1 front door (ScriptRunConfig, the estimators, the pipeline steps, HyperDrive's run config)
ends here: one function turns (source folder, script or command, arguments, compute target,
environment, distribution) into Hydra overrides of mltrain's groups, so a v1 submission and the
equivalent `mltrain job=script ...` command make the same job.
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
    extra: List[str] = field(default_factory=list)  # overrides the caller adds (estimator keys)
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
    """(`compute=` override, config folders) for a compute target given as an object or a name."""
    dirs = workspace.config_dirs() if workspace is not None else ()
    if target is None or target == "local":
        return ["compute=local"], dirs
    name = getattr(target, "name", None) or str(target)
    if name in shipped_options("compute"):  # mltrain's own presets, by name
        return [f"compute={name}"], dirs
    if workspace is None or not (workspace.config_dir / "compute" / f"{name}.yaml").is_file():
        where = workspace.config_dir / "compute" if workspace is not None else ".mltrain/compute"
        raise ComputeTargetException(f"ComputeTargetNotFound: Compute Target with name {name} not found in "
                                     f"provided workspace (mltrain: no {where}/{name}.yaml)")
    return [f"compute={name}"], dirs


def environment_overrides(environment: Any) -> List[str]:
    from mltrain.launch.request import override  # submission

    if environment is None:  # Azure's default environment; here: this interpreter
        return ["environment=current"]
    option, values = environment.to_mltrain()
    out = [f"environment={option}"]
    for key, value in values.items():
        if isinstance(value, dict) and key != "conda" and key != "environment_variables":
            out += [override(f"environment.{key}.{k}", v) for k, v in value.items()]
        elif key == "environment_variables":
            out += [override(f"++environment.environment_variables.{k}", v) for k, v in value.items()]
        else:
            out.append(override(f"environment.{key}", value))
    return out


def distribution_overrides(config: Any) -> List[str]:
    from mltrain.launch.request import override  # submission

    if config is None:
        return ["distribution=none"]
    values = config.to_mltrain()
    out = [f"distribution={values.pop('kind')}"]
    out += [override(f"distribution.{k}", v) for k, v in values.items()]
    return out


def request(job: V1Job, experiment: Any, origin: Dict[str, Any]) -> Any:
    from mltrain.launch.request import JobRequest, override  # submission

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
        overrides = ["job=command", override("job.source_directory", folder), override("job.command", command)]
    else:
        if not job.script:
            raise UserErrorException("ScriptRunConfig needs script= or command=")
        overrides = ["job=script", override("job.source_directory", folder), override("job.script", job.script),
                     override("job.arguments", arguments)]
    for key, value in job.params.items():  # `++`: job.params is a struct mapping whose keys are the user's
        value = value if isinstance(value, (int, float, str, bool)) else argument_text(value)
        overrides.append(override(f"++job.params.{key}", value))
    workspace = getattr(experiment, "workspace", None)
    compute, dirs = compute_overrides(job.compute_target, workspace)
    overrides += compute + environment_overrides(job.environment) + distribution_overrides(job.distribution)
    overrides += job.extra
    return JobRequest(overrides=tuple(overrides), config_dirs=dirs, experiment_name=experiment.name, origin=origin)


def _parallel_request(job: V1Job, folder: str, arguments: List[Any], experiment: Any, origin: Dict[str, Any]) -> Any:
    """A ParallelRunStep's job: job=parallel with its configuration's fields, one agent per node."""
    from mltrain.launch.request import JobRequest, override  # submission

    fields = dict(job.parallel or {})
    nodes = fields.pop("node_count", 1)
    variables = fields.pop("environment_variables", {})
    overrides = ["job=parallel", override("job.source_directory", folder),
                 override("job.program_arguments", [str(a) for a in arguments])]
    overrides += [override(f"job.{key}", value) for key, value in fields.items()]
    workspace = getattr(experiment, "workspace", None)
    compute, dirs = compute_overrides(job.compute_target, workspace)
    overrides += compute + environment_overrides(job.environment) + ["distribution=none",
                                                                     override("distribution.node_count", nodes)]
    overrides += [override(f"++environment.environment_variables.{k}", v) for k, v in variables.items()]
    return JobRequest(overrides=tuple(overrides), config_dirs=dirs, experiment_name=experiment.name, origin=origin)


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

    from mltrain.api import submit_request  # submission
    from mltrain.errors import MltrainError  # submission
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
