"""The pieces of a v1 pipeline graph: data between steps, parameters, and an ordering."""
from __future__ import annotations

from typing import Any, List, Optional

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.exceptions import UserErrorException


class PipelineData(RefuseUnknown):
    """A folder one step writes and later steps read (Azure's intermediate data)."""

    def __init__(self, name: str, datastore: Any = None, output_name: Optional[str] = None,
                 output_mode: str = "mount", output_path_on_compute: Optional[str] = None,
                 output_overwrite: Optional[bool] = None, data_type: Optional[str] = None,
                 is_directory: Optional[bool] = None, pipeline_output_name: Optional[str] = None,
                 training_output: Any = None) -> None:
        if not name or not str(name).isidentifier():
            raise UserErrorException(f"PipelineData name '{name}' is invalid: letters, digits and _ (it becomes "
                                     "AZUREML_DATAREFERENCE_<name>)")
        self.name = str(name)
        self.datastore = datastore
        self.output_mode = output_mode
        # a HyperDriveStep's output says what it holds (the trials' metrics, the best trial's model file); a
        # pipeline_output_name is how PipelineRun.get_pipeline_output finds the folder once the pipeline ran
        self.pipeline_output_name = pipeline_output_name
        self.training_output = training_output

    def as_input(self, input_name: Optional[str] = None) -> Any:
        from azureml.data import PipelineInput

        return PipelineInput(self, input_name)

    def as_download(self, input_name: Optional[str] = None, path_on_compute: Optional[str] = None,
                    overwrite: Optional[bool] = None) -> Any:
        return self.as_input(input_name)

    def as_mount(self, input_name: Optional[str] = None) -> Any:
        return self.as_input(input_name)

    def as_dataset(self) -> PipelineData:
        return self

    def __repr__(self) -> str:
        return f"$AZUREML_DATAREFERENCE_{self.name}"


class PipelineParameter:
    """A value chosen at submit time (`pipeline.submit(..., pipeline_parameters={name: value})`)."""

    def __init__(self, name: str, default_value: Any) -> None:
        self.name = name
        self.default_value = default_value

    def __repr__(self) -> str:
        return f"PipelineParameter(name={self.name!r}, default_value={self.default_value!r})"


class StepSequence:
    """Steps that run one after another (control-only ordering: no data between them)."""

    def __init__(self, steps: Optional[List[Any]] = None) -> None:
        self.steps = list(steps or [])
        for before, after in zip(self.steps, self.steps[1:]):
            after.run_after(before)


class TrainingOutput:
    """What a HyperDriveStep's output holds: "Metrics" (every trial's metrics, one JSON file) or "Model" (the best
    trial's `model_file`, a path in its run folder such as outputs/model/saved_model.pb)."""

    def __init__(self, type: str, iteration: Any = None, metric: Any = None, model_file: Any = None) -> None:
        self.type, self.iteration, self.metric, self.model_file = type, iteration, metric, model_file


from azureml.core._refused import module_getattr  # noqa: E402

__getattr__ = module_getattr("azureml.pipeline.core.graph", {
    name: "write the step as a PythonScriptStep or CommandStep" for name in ("InputPortDef", "OutputPortDef")})
