"""ParallelRunConfig and ParallelRunStep: Azure's v1 batch scoring step, as mltrain's parallel job
(`job=parallel`, mltrain.parallel.program): the entry script's init()/run(mini_batch) in
`process_count_per_node` workers on each of `node_count` instances, over a FileDataset's files or a
TabularDataset's rows, the rows run() returns appended to `append_row_file_name` in the step's output."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException
from azureml.pipeline.steps.base import _mark_producers, _Step

OUTPUT_ACTIONS = ("append_row", "summary_only")


class ParallelRunConfig:
    def __init__(self, environment: Any, entry_script: str, error_threshold: int, output_action: str,
                 compute_target: Any, node_count: int, process_count_per_node: Optional[int] = None,
                 mini_batch_size: Any = None, source_directory: Optional[str] = None, description: Optional[str] = None,
                 logging_level: str = "INFO", run_invocation_timeout: int = 60, run_max_try: int = 3,
                 append_row_file_name: Optional[str] = None, allowed_failed_count: Optional[int] = None,
                 allowed_failed_percent: Optional[float] = None, partition_keys: Optional[List[str]] = None,
                 environment_variables: Optional[Dict[str, str]] = None) -> None:
        if output_action not in OUTPUT_ACTIONS:
            raise UserErrorException(f"ParallelRunConfig: output_action '{output_action}' is not one of "
                                     f"{', '.join(OUTPUT_ACTIONS)}")
        if not entry_script:
            raise UserErrorException("ParallelRunConfig: entry_script is required")
        for name, value, low in (("node_count", node_count, 1), ("process_count_per_node", process_count_per_node, 1),
                                 ("run_max_try", run_max_try, 1), ("run_invocation_timeout", run_invocation_timeout, 1)):
            value = getattr(value, "default_value", value)  # a PipelineParameter (Azure takes one for the counts)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < low):
                raise UserErrorException(f"ParallelRunConfig: {name} must be an integer of at least {low}, "
                                         f"got {value!r}")
        self.environment, self.entry_script = environment, entry_script
        self.error_threshold, self.output_action = error_threshold, output_action
        self.compute_target, self.node_count = compute_target, node_count
        self.process_count_per_node = process_count_per_node
        self.mini_batch_size, self.source_directory, self.description = mini_batch_size, source_directory, description
        self.logging_level, self.run_invocation_timeout, self.run_max_try = logging_level, run_invocation_timeout, run_max_try
        self.append_row_file_name = append_row_file_name
        self.allowed_failed_count, self.allowed_failed_percent = allowed_failed_count, allowed_failed_percent
        self.partition_keys, self.environment_variables = partition_keys, environment_variables

    def fields(self) -> Dict[str, Any]:
        """The job=parallel fields this configuration sets."""
        out: Dict[str, Any] = {"entry_script": self.entry_script, "error_threshold": int(self.error_threshold),
                               "output_action": self.output_action, "logging_level": str(self.logging_level).upper(),
                               "timeout": self.run_invocation_timeout, "max_retries": self.run_max_try - 1,
                               # Azure's default: one worker per core of the node; one here unless given
                               "max_concurrency_per_instance": self.process_count_per_node or 1,
                               "node_count": self.node_count}
        if self.mini_batch_size is not None:
            out["mini_batch_size"] = self.mini_batch_size
        if self.append_row_file_name:
            out["append_row_file_name"] = self.append_row_file_name
        if self.allowed_failed_count is not None:
            out["mini_batch_error_threshold"] = int(self.allowed_failed_count)
        if self.allowed_failed_percent is not None:
            out["allowed_failed_percent"] = float(self.allowed_failed_percent)
        if self.partition_keys:
            out["partition_keys"] = list(self.partition_keys)
        return out


class ParallelRunStep(_Step):
    _kind = "ParallelRunStep"

    def __init__(self, name: str, parallel_run_config: ParallelRunConfig, inputs: List[Any], output: Any = None,
                 side_inputs: Optional[List[Any]] = None, arguments: Optional[List[Any]] = None,
                 allow_reuse: bool = True) -> None:
        if not isinstance(parallel_run_config, ParallelRunConfig):
            raise UserErrorException("ParallelRunStep: parallel_run_config must be a ParallelRunConfig")
        if not inputs or len(inputs) != 1:
            raise UserErrorException("ParallelRunStep: inputs must be a list of one dataset (mltrain reads one "
                                     f"input; got {len(inputs or [])})")
        config = parallel_run_config
        super().__init__(name, config.source_directory, arguments, config.compute_target,
                         [*inputs, *(side_inputs or [])], [output] if output is not None else [], None, allow_reuse,
                         None, None)
        self.config, self.data_input, self.output = config, inputs[0], output
        _mark_producers(self)

    def _program(self) -> Dict[str, Any]:
        return {"parallel": self.config.fields()}

    def _settings(self) -> List[Any]:
        return list(self.config.fields().values())

    def _environment(self) -> Any:
        return self.config.environment

    def _distribution(self) -> Any:
        return None  # one agent per node: distribution=none with node_count (the compiled job's own keys)
