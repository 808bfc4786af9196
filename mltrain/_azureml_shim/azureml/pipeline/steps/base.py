"""The v1 steps, and their compilation into mltrain pipeline steps (one `steps:` entry each).

A step's data is Azure's: PipelineData / OutputFileDatasetConfig objects a step lists in `outputs`
(or, for OutputFileDatasetConfig, names in its arguments) are its output folders; a step that lists
one in `inputs` or names it (or `.as_input()`) in its arguments reads it, and runs after its producer.
In arguments they become the folder's path; in every rank they are also AZUREML_DATAREFERENCE_<name>.
"""
from __future__ import annotations

import re
import warnings
from typing import Any, Dict, List, Optional, Tuple

from azureml.exceptions import UserErrorException

_SAID: set = set()


def _say_once(what: str) -> None:
    if what not in _SAID:
        _SAID.add(what)
        warnings.warn(what, DeprecationWarning, stacklevel=4)


def step_key(name: str) -> str:
    """A step's name as an mltrain step key (letters, digits, _, -)."""
    return re.sub(r"[^\w-]", "_", str(name)) or "step"


class _Step:
    _kind = "PipelineStep"

    def __init__(self, name: str, source_directory: Optional[str], arguments: Optional[List[Any]],
                 compute_target: Any, inputs: Optional[List[Any]], outputs: Optional[List[Any]],
                 params: Optional[Dict[str, Any]], allow_reuse: bool, version: Optional[str],
                 hash_paths: Optional[List[str]], runconfig: Any = None) -> None:
        if not name:
            raise UserErrorException(f"{self._kind}: name is required")
        self.name = str(name)
        self.source_directory = source_directory
        self.arguments = list(arguments or [])
        self.compute_target = compute_target
        self.inputs = list(inputs or [])
        self.outputs = list(outputs or [])
        self.params = dict(params or {})
        self.allow_reuse = bool(allow_reuse)
        self.version = version
        self.hash_paths = list(hash_paths or [])
        self.runconfig = runconfig
        self._after: List[_Step] = []

    def run_after(self, step: Any) -> None:
        self._after.append(step)

    # what each kind says about its program, environment and distribution
    def _program(self) -> Dict[str, Any]:
        raise NotImplementedError

    def _settings(self) -> List[Any]:
        """Values of the step's own settings, where a PipelineParameter may stand (a ParallelRunConfig's counts)."""
        return []

    def _run_config(self) -> Any:
        """The RunConfiguration: given, or a ScriptRunConfig's own."""
        return getattr(self.runconfig, "run_config", self.runconfig)

    def _environment(self) -> Any:
        rc = self._run_config()
        return getattr(rc, "environment", None) if rc is not None else None

    def _distribution(self) -> Any:
        given = getattr(self.runconfig, "distributed_job_config", None)
        if given is not None:
            return given
        rc = self._run_config()
        return rc.distribution() if rc is not None else None


def _is_output(value: Any) -> bool:
    from azureml.data import OutputFileDatasetConfig
    from azureml.pipeline.core.graph import PipelineData

    return isinstance(value, (PipelineData, OutputFileDatasetConfig))


def _written_by(step: _Step) -> List[Any]:
    from azureml.data import OutputFileDatasetConfig

    found = [o for o in step.outputs if _is_output(o)]
    found += [a for a in step.arguments if isinstance(a, OutputFileDatasetConfig) and all(a is not f for f in found)]
    return found


def _read_by(step: _Step) -> List[Any]:
    from azureml.data import PipelineInput

    out = []
    for item in [*step.inputs, *step.arguments]:
        data = item.output if isinstance(item, PipelineInput) else item
        if _is_output(data) and all(data is not w for w in _written_by(step)):
            out.append(data)
    return out


def producers(step: _Step) -> List[_Step]:
    """Steps this one reads from or runs after (for Pipeline's resolve_closure)."""
    return [p for p in (getattr(d, "_producer", None) for d in _read_by(step)) if p is not None] + step._after


def compile_steps(steps: List[_Step], parameters: Dict[str, Any], default_source: Optional[str]
                  ) -> Tuple[Dict[str, Any], Tuple[str, ...]]:
    """({step key: StepConf values}, config folders) for mltrain's pipeline file."""
    from azureml.core import _compile
    from azureml.core.experiment import Experiment
    from azureml.pipeline.core.graph import PipelineParameter

    made_by: Dict[int, Tuple[str, str]] = {}
    for step in steps:
        for data in _written_by(step):
            if id(data) in made_by:
                raise UserErrorException(f"'{data.name}' is written by two steps ({made_by[id(data)][0]} and "
                                         f"{step.name})")
            made_by[id(data)] = (step_key(step.name), data.name)
    known = {p.name for s in steps for p in map(_unbound, [*s.inputs, *s.arguments, *s.params.values(),
                                                            *s._settings()])
             if isinstance(p, PipelineParameter)}
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise UserErrorException(f"pipeline_parameters: '{unknown[0]}' is not a PipelineParameter of this pipeline "
                                 f"(parameters: {', '.join(sorted(known)) or 'none'})")
    out: Dict[str, Any] = {}
    dirs: Tuple[str, ...] = ()
    for step in steps:
        data = _StepData(step, made_by, parameters)
        entry: Dict[str, Any]
        custom = getattr(step, "_entry", None)
        if custom is not None:  # a HyperDriveStep: its own program, which drives a sweep
            entry = custom(data)
            step_dirs = entry.pop("config_dirs")
            dirs = dirs or step_dirs
            entry.update(params={}, inputs=data.inputs, outputs=[d.name for d in _written_by(step)],
                         after=[step_key(s.name) for s in step._after], allow_reuse=step.allow_reuse)
            if step.version is not None:
                entry["version"] = str(step.version)
            out[step_key(step.name)] = entry
            continue
        for item in step.inputs:
            data.value(item)
        program = step._program()
        command, arguments = program.get("command"), [data.value(a) for a in step.arguments]
        if program.get("command_items"):  # a CommandStep's list command: its items, joined as Azure joins them
            command = [a if isinstance(a, str) else _compile.command_line([v])
                       for a, v in zip(step.arguments, arguments)]
            arguments = []
        job = _compile.V1Job(source_directory=step.source_directory or default_source or ".",
                             script=program.get("script"), command=command,
                             arguments=arguments, compute_target=step.compute_target,
                             environment=step._environment(), distribution=step._distribution(),
                             values=dict(program.get("values", {})))
        if program.get("parallel") is not None:  # a ParallelRunStep: its dataset and output are the job's
            job.parallel = _parallel_fields(step, program["parallel"], data)
        params = {str(k): data.value(v) for k, v in step.params.items()}
        params.update(data.datasets)  # the consumed datasets' definitions: in the reuse key, read by input_datasets
        request = _compile.request(job, Experiment(_workspace_of(step), "pipeline", _skip_name_validation=True), {})
        dirs = dirs or tuple(request.config_dirs)
        entry = {"overrides": list(request.choices()), "values": request.values or {},
                 "params": params, "inputs": data.inputs, "outputs": [d.name for d in _written_by(step)],
                 "after": [step_key(s.name) for s in step._after], "allow_reuse": step.allow_reuse}
        if step.version is not None:
            entry["version"] = str(step.version)
        if step.hash_paths:
            entry["hash_paths"] = list(step.hash_paths)
        out[step_key(step.name)] = entry
    return out, dirs


def _parallel_fields(step: Any, fields: Dict[str, Any], data: _StepData) -> Dict[str, Any]:
    from azureml.data.tabular_dataset import TabularDataset, TabularDatasetConsumption

    source = step.data_input
    dataset = source.dataset if isinstance(source, TabularDatasetConsumption) else source
    # a PipelineParameter stands for its value at submit time (the mini-batch size, the counts, the dataset)
    out = {key: data.value(value) for key, value in fields.items()}
    out.update(input_data=data.value(source), input_format="tabular" if isinstance(dataset, TabularDataset) else "files")
    out["node_count"], out["max_concurrency_per_instance"] = int(out["node_count"]), int(out["max_concurrency_per_instance"])
    if out.get("mini_batch_size") is not None:
        out["mini_batch_size"] = str(out["mini_batch_size"])
    if step.output is not None:
        out["append_row_to"] = data.value(step.output)
    if step.config.environment_variables:
        out["environment_variables"] = dict(step.config.environment_variables)
    return out


def _unbound(item: Any) -> Any:
    """A `(PipelineParameter, DataPathComputeBinding)` tuple (Azure's way to say how a DataPath parameter
    reaches the step: mount or download) is its parameter: here a step reads the DataPath's folder in place."""
    if isinstance(item, tuple) and len(item) == 2 and type(item[1]).__name__ == "DataPathComputeBinding":
        return item[0]
    # DatasetConsumptionConfig(name, PipelineParameter(default_value=dataset)): the parameter, chosen at submit
    if type(item).__name__ == "DatasetConsumptionConfig" and type(item.dataset).__name__ == "PipelineParameter":
        return item.dataset
    return item


def _is_consumption(item: Any) -> bool:
    from azureml.core.dataset import DatasetConsumptionConfig
    from azureml.data.tabular_dataset import TabularDatasetConsumption

    return isinstance(item, (DatasetConsumptionConfig, TabularDatasetConsumption))


def _is_dataset(value: Any) -> bool:
    from azureml.core.dataset import FileDataset
    from azureml.data.tabular_dataset import TabularDataset

    return isinstance(value, (FileDataset, TabularDataset))


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


class _StepData:
    """One step's data: what its arguments and params become, and the inputs they make it read."""

    def __init__(self, step: _Step, made_by: Dict[int, Tuple[str, str]], parameters: Dict[str, Any]) -> None:
        self.step, self.made_by, self.parameters = step, made_by, parameters
        self.inputs: Dict[str, Any] = {}
        self.datasets: Dict[str, str] = {}  # {mltrain_dataset_<input name>: the consumed dataset's definition}

    def value(self, item: Any) -> Any:
        from azureml.data import PipelineInput
        from azureml.pipeline.core.graph import PipelineParameter

        if _is_consumption(item):
            return self._consumed(item)
        item = _unbound(item)
        if isinstance(item, PipelineParameter):
            chosen = self._chosen(item)
            if getattr(chosen, "_mltrain_path", None) is None:
                return chosen
            self.inputs[item.name] = chosen._mltrain_path()  # a DataPath (or dataset) chosen at submit time
            return "${inputs." + item.name + "}"
        data = item.output if isinstance(item, PipelineInput) else item
        if _is_output(data):
            if any(data is w for w in _written_by(self.step)):
                return "${outputs." + data.name + "}"
            return "${inputs." + self._input(data, item) + "}"
        path = getattr(item, "_mltrain_path", None)
        if path is not None:
            name = getattr(item, "name", None) or getattr(item, "data_reference_name", None) or f"in{len(self.inputs)}"
            self.inputs[str(name)] = path()
            return "${inputs." + str(name) + "}"
        return item

    def _consumed(self, item: Any) -> str:
        """A dataset consumed under a name (DatasetConsumptionConfig, as_named_input), or a PipelineParameter's
        dataset chosen at submit time: the step input `name`, and the dataset's definition as its parameter."""
        from azureml.core.dataset import DEFINITION_PARAM, consumed, save
        from azureml.pipeline.core.graph import PipelineParameter

        dataset = item.dataset
        if isinstance(dataset, PipelineParameter):
            dataset = self._chosen(dataset)
            if not _is_dataset(dataset):
                raise UserErrorException(f"DatasetConsumptionConfig('{item.name}', PipelineParameter "
                                         f"'{item.dataset.name}'): the parameter's value must be a Dataset.Tabular or "
                                         f"Dataset.File dataset, not {_shown(dataset)}")
        save(dataset)  # Azure saves a dataset it submits: dataset.id, for Dataset.get_by_id and REST calls
        self.inputs[str(item.name)] = dataset._mltrain_path()
        self.datasets[DEFINITION_PARAM + str(item.name)] = consumed(str(item.mode), dataset)
        return "${inputs." + str(item.name) + "}"

    def _chosen(self, param: Any) -> Any:
        """A PipelineParameter's value for this submit; a dataset parameter takes a dataset of the same kind."""
        chosen = self.parameters.get(param.name, param.default_value)
        default = param.default_value
        if _is_dataset(default) and type(chosen) is not type(default):
            raise UserErrorException(f"pipeline_parameters['{param.name}'] must be a {type(default).__name__} (as its "
                                     f"default is), not {_shown(chosen)}")
        return chosen

    def _input(self, data: Any, item: Any) -> str:
        from azureml.data import PipelineInput

        producer = self.made_by.get(id(data))
        if producer is None:
            raise UserErrorException(f"step '{self.step.name}' reads '{data.name}', which no step of this pipeline "
                                     "writes (list it in that step's outputs)")
        name = str((getattr(item, "name", None) if isinstance(item, PipelineInput) else None) or data.name)
        self.inputs[name] = f"{producer[0]}.outputs.{producer[1]}"
        return name


def _workspace_of(step: _Step) -> Any:
    workspace = getattr(step.compute_target, "workspace", None)
    if workspace is None:
        from azureml.core.workspace import Workspace

        try:
            workspace = Workspace.from_config()
        except UserErrorException:
            workspace = None
    return workspace


def _mark_producers(step: _Step) -> None:
    for data in _written_by(step):
        data._producer = step


class PythonScriptStep(_Step):
    _kind = "PythonScriptStep"

    def __init__(self, script_name: str, name: Optional[str] = None, arguments: Optional[List[Any]] = None,
                 compute_target: Any = None, runconfig: Any = None, runconfig_pipeline_params: Any = None,
                 inputs: Optional[List[Any]] = None, outputs: Optional[List[Any]] = None,
                 params: Optional[Dict[str, Any]] = None, source_directory: Optional[str] = None,
                 allow_reuse: bool = True, version: Optional[str] = None, hash_paths: Optional[List[str]] = None
                 ) -> None:
        if hash_paths:
            _say_once("PythonScriptStep: hash_paths is deprecated by Azure ML; mltrain still hashes only them")
        super().__init__(name or script_name, source_directory, arguments, compute_target, inputs, outputs, params,
                         allow_reuse, version, hash_paths, runconfig)
        self.script_name = script_name
        _mark_producers(self)

    def _program(self) -> Dict[str, Any]:
        return {"script": self.script_name}


class CommandStep(_Step):
    _kind = "CommandStep"

    def __init__(self, command: Any = None, name: Optional[str] = None, compute_target: Any = None,
                 runconfig: Any = None, runconfig_pipeline_params: Any = None, inputs: Optional[List[Any]] = None,
                 outputs: Optional[List[Any]] = None, params: Optional[Dict[str, Any]] = None,
                 source_directory: Optional[str] = None, allow_reuse: bool = True, version: Optional[str] = None
                 ) -> None:
        script_config = runconfig if hasattr(runconfig, "run_config") else None  # a ScriptRunConfig
        if command is None and script_config is not None:
            command = script_config.command
            source_directory = source_directory or script_config.source_directory
            compute_target = compute_target or script_config.run_config.target
        if command is None:
            raise UserErrorException("CommandStep: command is required (or a ScriptRunConfig with command= as "
                                     "runconfig)")
        super().__init__(name or "command", source_directory, None, compute_target, inputs, outputs, params,
                         allow_reuse, version, None, runconfig)
        self.command = command
        # a command names its data inline; as arguments they are compiled like a script step's
        self.arguments = list(command) if isinstance(command, list) else []
        _mark_producers(self)

    def _program(self) -> Dict[str, Any]:
        return {"command_items": True} if isinstance(self.command, list) else {"command": self.command}


class MpiStep(_Step):
    """Seed 000: an MPI job as a pipeline step (deprecated by Azure for CommandStep; still run here)."""

    _kind = "MpiStep"

    def __init__(self, name: Optional[str] = None, source_directory: Optional[str] = None,
                 script_name: Optional[str] = None, arguments: Optional[List[Any]] = None, compute_target: Any = None,
                 node_count: Any = None, process_count_per_node: Any = None, inputs: Optional[List[Any]] = None,
                 outputs: Optional[List[Any]] = None, allow_reuse: bool = True, version: Optional[str] = None,
                 hash_paths: Optional[List[str]] = None, **kwargs: Any) -> None:
        _say_once("MpiStep is deprecated by Azure ML (use CommandStep with MpiConfiguration); mltrain runs it as is")
        if hash_paths:
            _say_once("MpiStep: hash_paths is deprecated by Azure ML; mltrain still hashes only them")
        for required, value in (("name", name), ("source_directory", source_directory), ("script_name", script_name),
                                ("compute_target", compute_target), ("node_count", node_count),
                                ("process_count_per_node", process_count_per_node)):
            if value is None:
                raise UserErrorException(f"MpiStep: {required} is required")
        known = {"params", "use_gpu", "use_docker", "custom_docker_image", "image_registry_details", "user_managed",
                 "conda_packages", "pip_packages", "pip_requirements_file_path", "environment_definition"}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise UserErrorException(f"MpiStep: unknown parameter '{unknown[0]}' (allowed besides the named ones: "
                                     f"{', '.join(sorted(known))})")
        super().__init__(str(name), source_directory, arguments, compute_target, inputs, outputs,
                         kwargs.get("params"), allow_reuse, version, hash_paths)
        self.script_name = str(script_name)
        self.node_count, self.process_count_per_node = node_count, process_count_per_node
        self.options = kwargs
        _mark_producers(self)

    def _program(self) -> Dict[str, Any]:
        return {"script": self.script_name, "values": {"job": {"use_gpu": True}} if self.options.get("use_gpu") else {}}

    def _estimator(self) -> Any:
        from azureml.train.estimator import Estimator

        o = self.options
        return Estimator(str(self.source_directory), entry_script=self.script_name,
                         user_managed=bool(o.get("user_managed")), conda_packages=o.get("conda_packages"),
                         pip_packages=o.get("pip_packages"), pip_requirements_file=o.get("pip_requirements_file_path"),
                         custom_docker_image=o.get("custom_docker_image") if o.get("use_docker", True) else None,
                         environment_definition=o.get("environment_definition"))

    def _environment(self) -> Any:
        return self._estimator()._environment()

    def _distribution(self) -> Any:
        from azureml.core.runconfig import MpiConfiguration
        from azureml.pipeline.core.graph import PipelineParameter

        def number(v: Any) -> int:
            return int(v.default_value if isinstance(v, PipelineParameter) else v)

        return MpiConfiguration(process_count_per_node=number(self.process_count_per_node),
                                node_count=number(self.node_count))
