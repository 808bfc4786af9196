"""HyperDriveStep: a HyperDriveConfig's sweep as one step of a v1 pipeline, and HyperDriveStepRun, its run.

The step is one run of the pipeline (a controller: on Slurm it asks for one CPU, its trials for the rest)
whose program, mltrain.command.sweep_step_program, starts the very sweep `Experiment.submit(hyperdrive_config)`
would start, with the step's inputs filled in, and waits for it. When the sweep has ended, the step's
outputs are filled from it as Azure fills them (HyperDriveStep's documentation and its notebook,
aml-pipelines-parameter-tuning-with-hyperdrive):

- an output made with `TrainingOutput("Metrics")`, or given as `metrics_output`: one JSON file, every
  trial's metrics by run id (`{run_id: {metric: value or [values]}}`);
- `TrainingOutput("Model", model_file=PATH)`: the best trial's file at PATH of its run folder
  (`outputs/model/saved_model.pb`);
- any other PipelineData: the best trial's folder of the same name, `./outputs/NAME` in its run.

Later steps read these (the best trial's model file, as a path) and run after the sweep.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException
from azureml.pipeline.steps.base import _mark_producers, _Step
from azureml.train.hyperdrive.run import HyperDriveRun


class HyperDriveStep(_Step):
    _kind = "HyperDriveStep"

    def __init__(self, name: str, hyperdrive_config: Any, estimator_entry_script_arguments: Optional[List[Any]] = None,
                 inputs: Optional[List[Any]] = None, outputs: Optional[List[Any]] = None, metrics_output: Any = None,
                 allow_reuse: bool = True, version: Optional[str] = None) -> None:
        from azureml.train.hyperdrive import HyperDriveConfig

        if not isinstance(hyperdrive_config, HyperDriveConfig):
            raise UserErrorException(f"HyperDriveStep: hyperdrive_config must be a HyperDriveConfig, not "
                                     f"{type(hyperdrive_config).__name__}")
        hyperdrive_config._check()  # Azure's refusals of the sampling and policy, before the pipeline is built
        trial = hyperdrive_config.run_config._job()  # the trial's V1Job: its folder and compute
        found = list(outputs or [])
        if metrics_output is not None and all(metrics_output is not o for o in found):
            found.append(metrics_output)
        super().__init__(name, trial.source_directory, None, trial.compute_target, inputs, found, None, allow_reuse,
                         version, None, None)
        self.hyperdrive_config = hyperdrive_config
        self.estimator_entry_script_arguments = list(estimator_entry_script_arguments or [])
        self.metrics_output = metrics_output
        for data in self.estimator_entry_script_arguments:
            if any(data is o for o in self.outputs):
                raise UserErrorException(f"HyperDriveStep '{name}': output '{data.name}' cannot be a trial's "
                                         f"argument: each trial writes ./outputs/{data.name} in its own run, and the "
                                         "best trial's folder becomes the step's output")
        _mark_producers(self)

    def _program(self) -> Dict[str, Any]:
        return {"hyperdrive": True}

    def _settings(self) -> List[Any]:
        return list(self.estimator_entry_script_arguments)

    def output_kinds(self) -> Dict[str, Dict[str, Any]]:
        """What each output holds: {name: {"kind": "metrics" | "model" | "folder", "model_file": ...}}."""
        kinds: Dict[str, Dict[str, Any]] = {}
        for data in self.outputs:
            training = getattr(data, "training_output", None)
            kind = str(getattr(training, "type", "") or "").lower()
            if data is self.metrics_output or kind == "metrics":
                kinds[data.name] = {"kind": "metrics"}
            elif kind == "model":
                model_file = getattr(training, "model_file", None)
                kinds[data.name] = {"kind": "model", "model_file": str(model_file) if model_file else None}
            elif kind:
                raise UserErrorException(f"HyperDriveStep '{self.name}': TrainingOutput type '{training.type}' of "
                                         f"'{data.name}' is not supported (Metrics or Model)")
            else:
                kinds[data.name] = {"kind": "folder"}
        return kinds

    def _entry(self, data: Any) -> Dict[str, Any]:
        """The step as mltrain runs it: a command step whose program drives the sweep."""
        import base64
        import json
        import os

        from azureml.core import _compile
        from azureml.core.experiment import Experiment
        from azureml.pipeline.steps.base import _workspace_of
        from azureml.train.hyperdrive.config import _safe

        config = self.hyperdrive_config
        arguments = [data.value(a) for a in self.estimator_entry_script_arguments]
        for item in self.inputs:
            data.value(item)
        workspace = _workspace_of(self)
        experiment = Experiment(workspace, "pipeline", _skip_name_validation=True)
        choices, values, dirs = config._request(experiment, {}, extra_arguments=arguments)
        names = {f"job.params.{_safe(n)}": n for n in config._sampling.specs()}
        payload = {"request": {"overrides": list(choices), "values": values, "config_dirs": [str(d) for d in dirs]},
                   "cwd": os.getcwd(), "outputs": self.output_kinds(), "names": names}
        encoded = base64.b64encode(json.dumps(payload).encode()).decode()  # no `$`, quote or space
        args = [f'--input "{name}=${{inputs.{name}}}"' for name in data.inputs]
        args += [f'--output "{o.name}=${{outputs.{o.name}}}"' for o in self.outputs]
        command = f'exec "$MLTRAIN_PYTHON" -m mltrain.command.sweep_step_program {encoded} {" ".join(args)}'.rstrip()
        folder = os.path.abspath(self.source_directory or ".")
        compute, _ = _compile.compute_overrides(self.compute_target, workspace)
        # the step's snapshot is the trial's folder, so editing the trial's script reruns the step (reuse key)
        return {"overrides": ["job=command", *compute, "environment=current", "distribution=none"],
                "values": {"job": {"source_directory": folder, "command": command}},
                "controller": True, "config_dirs": tuple(str(d) for d in dirs)}


class HyperDriveStepRun(HyperDriveRun):
    """A HyperDriveStep's run in a pipeline: the step's sweep, with HyperDriveRun's calls
    (get_best_run_by_primary_metric, get_metrics, get_hyperparameters, get_children...)."""

    def __init__(self, step_run: Any) -> None:
        import json
        from pathlib import Path

        folder = Path(str(step_run._dir))
        record: Dict[str, Any] = {}
        try:
            record = dict(json.loads((folder / "sweep_step.json").read_text(encoding="utf-8")))
        except (OSError, ValueError):
            pass
        super().__init__(step_run.experiment, step_run.id, _sweep_dir=str(record.get("sweep_dir") or folder / "sweep"),
                         _names=record.get("names"))
        self._step_run = step_run

    def get_status(self) -> str:
        return str(self._step_run.get_status())

    def wait_for_completion(self, show_output: bool = False, wait_post_processing: bool = False,
                            raise_on_error: bool = True) -> Dict[str, Any]:
        self._step_run.wait_for_completion(show_output=show_output, raise_on_error=raise_on_error)
        return self.get_details()
