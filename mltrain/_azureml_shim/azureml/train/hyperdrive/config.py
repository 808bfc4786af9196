"""HyperDriveConfig: a run configuration swept by mltrain's HyperDrive engine."""
from __future__ import annotations

import re
import time
import uuid
from typing import Any, Dict, Optional, Sequence

from azureml.exceptions import UserErrorException


class PrimaryMetricGoal:
    MAXIMIZE = "MAXIMIZE"
    MINIMIZE = "MINIMIZE"


def _safe(name: str) -> str:
    """A parameter's name as a config key and a variable name (`--batch-size` -> `batch_size`)."""
    key = re.sub(r"\W", "_", name.lstrip("-"))
    return key if key and not key[0].isdigit() else f"p_{key}"


def _flag(name: str) -> str:
    return name if name.startswith("-") else f"--{name}"


def _placeholder(spec: Dict[str, Any]) -> Any:
    return spec["values"][0] if spec["type"] == "choice" else 0


class HyperDriveConfig:
    def __init__(self, hyperparameter_sampling: Any = None, primary_metric_name: Optional[str] = None,
                 primary_metric_goal: Optional[str] = None, max_total_runs: Optional[int] = None,
                 max_concurrent_runs: Optional[int] = None, max_duration_minutes: int = 10080, policy: Any = None,
                 estimator: Any = None, run_config: Any = None, resume_from: Any = None, resume_child_runs: Any = None,
                 pipeline: Any = None, debug_flag: Any = None, custom_run_id: Optional[str] = None) -> None:
        if hyperparameter_sampling is None:
            raise UserErrorException("HyperDriveConfig: hyperparameter_sampling is required")
        if primary_metric_name is None or primary_metric_goal is None:
            raise UserErrorException("HyperDriveConfig: primary_metric_name and primary_metric_goal are required")
        if max_total_runs is None:
            raise UserErrorException("HyperDriveConfig: max_total_runs is required")
        if (estimator is None) == (run_config is None) and pipeline is None:
            raise UserErrorException("HyperDriveConfig: give exactly one of run_config (a ScriptRunConfig) and "
                                     "estimator")
        if pipeline is not None:
            from azureml.core._bridge import unsupported

            unsupported("HyperDriveConfig(pipeline=...)", "sweep a ScriptRunConfig; inside a pipeline use HyperDriveStep")
        if resume_from is not None or resume_child_runs is not None:
            from azureml.core._bridge import unsupported

            unsupported("HyperDriveConfig(resume_from=...)", "`mltrain runs resume SWEEP` continues a stopped sweep")
        goal = str(primary_metric_goal).upper()
        if goal not in (PrimaryMetricGoal.MAXIMIZE, PrimaryMetricGoal.MINIMIZE):
            raise UserErrorException(f"HyperDriveConfig: primary_metric_goal '{primary_metric_goal}' is not supported "
                                     "(PrimaryMetricGoal.MAXIMIZE or MINIMIZE)")
        self._sampling = hyperparameter_sampling
        self._primary_metric_name = primary_metric_name
        self._primary_metric_goal = goal
        self._max_total_runs = max_total_runs
        self._max_concurrent_runs = max_concurrent_runs
        self._max_duration_minutes = max_duration_minutes
        self._policy = policy
        self._run_config = run_config if run_config is not None else estimator
        self._custom_run_id = custom_run_id

    @property
    def run_config(self) -> Any:
        return self._run_config

    # ------------------------------------------------------------------ to mltrain
    def _sweep_values(self) -> Dict[str, Any]:
        from azureml.train.hyperdrive.policy import NoTerminationPolicy

        values: Dict[str, Any] = {
            "sampling": self._sampling.sampling(), "primary_metric": self._primary_metric_name,
            "goal": self._primary_metric_goal.lower(), "max_total_runs": int(self._max_total_runs),
            "max_duration_minutes": float(self._max_duration_minutes),
        }
        if self._max_concurrent_runs is not None:
            values["max_concurrent_runs"] = int(self._max_concurrent_runs)
        if self._sampling.seed() is not None:
            values["seed"] = self._sampling.seed()
        policy = self._policy or NoTerminationPolicy()
        values["early_termination"] = policy.to_mltrain()
        return values

    def _check(self) -> None:
        """Azure's refusals of this combination (sampling, policy, limits), raised before anything starts."""
        from mltrain.base.errors import MltrainError  # submission
        from mltrain.sweeps import settings  # submission

        try:
            settings.check(settings.from_config(self._sweep_values()))
        except MltrainError as exc:
            raise UserErrorException(f"HyperDriveConfig: {exc}") from None

    def _request(self, experiment: Any, origin: Dict[str, Any], extra_arguments: Sequence[Any] = ()) -> tuple:
        """(group choices, typed values, config folders) of the sweep; `extra_arguments` follow the trial
        script's own (a HyperDriveStep's estimator_entry_script_arguments). The caller places the sweep
        (`hydra.sweep.dir`) and names its experiment."""
        from azureml.core import _compile

        from mltrain.azureml.sweep_job import grammar  # submission
        from mltrain.launch.request import merge_values  # submission

        job = self._run_config._job()
        # a new list: the run config's own arguments stay as the user wrote them, whatever is submitted twice
        job.arguments = [*job.arguments, *extra_arguments]
        specs = self._sampling.specs()
        for name, spec in specs.items():
            job.arguments += [_flag(name), "${job.params." + _safe(name) + "}"]
            job.params[_safe(name)] = _placeholder(spec)
        request = _compile.request(job, experiment, origin)
        space = {f"job.params.{_safe(name)}": grammar(spec) for name, spec in specs.items()}
        sweep = {**self._sweep_values(), "params": space}
        values = merge_values(request.values or {}, {"sweep": sweep})
        return list(request.choices()), values, request.config_dirs

    def _submit(self, experiment: Any, tags: Any, origin: Dict[str, Any]) -> Any:
        from azureml.train.hyperdrive.run import HyperDriveRun

        from mltrain.base.errors import MltrainError  # submission
        from mltrain.base.home import mltrain_home
        from mltrain.launch.request import Request, merge_values  # submission
        from mltrain.python_api.api import submit_multirun  # submission

        self._check()
        name = self._custom_run_id or f"HD_{experiment.name}_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"
        sweep_dir = mltrain_home() / "runs" / "_sweeps" / name
        choices, values, dirs = self._request(experiment, origin)
        values = merge_values(values, {"experiment_name": experiment.name, "hydra": {"sweep": {"dir": str(sweep_dir)}}})
        try:
            driver = submit_multirun(Request(overrides=tuple(choices), values=values, config_dirs=tuple(dirs)),
                                     ready=str(sweep_dir / "sweep.json"), name=name)
        except MltrainError as exc:
            raise UserErrorException(str(exc)) from None
        run = HyperDriveRun(experiment, name, _sweep_dir=str(sweep_dir), _driver=driver,
                            _names={f"job.params.{_safe(n)}": n for n in self._sampling.specs()})
        if tags:
            run.set_tags(dict(tags))
        return run
