"""`ScriptRunConfig`: a script (or a command) in a source folder, on a compute target, in an environment,
optionally distributed: `job=script` (or `job=command`) with the workspace's compute and environment."""
from __future__ import annotations

from typing import Any, List, Optional, Union

from azureml.core._compile import V1Job, submit


class ScriptRunConfig:
    MAX_DURATION_SECONDS_DEFAULT = 2592000

    def __init__(self, source_directory: str, script: Optional[str] = None, arguments: Optional[List[Any]] = None,
                 run_config: Any = None, _telemetry_values: Any = None, compute_target: Any = None,
                 environment: Any = None, distributed_job_config: Any = None, resume_from: Any = None,
                 max_run_duration_seconds: int = MAX_DURATION_SECONDS_DEFAULT,
                 command: Optional[Union[List[Any], str]] = None, docker_runtime_config: Any = None) -> None:
        from azureml.core.runconfig import RunConfiguration

        self.source_directory = source_directory
        self.script = script
        self.command = command
        self.arguments = list(arguments or [])
        self.run_config = run_config or RunConfiguration()
        if compute_target is not None:
            self.run_config.target = compute_target
        if environment is not None:
            self.run_config.environment = environment
            self._environment_given = True
        if max_run_duration_seconds != self.MAX_DURATION_SECONDS_DEFAULT:
            self.run_config.max_run_duration_seconds = max_run_duration_seconds
        self.distributed_job_config = distributed_job_config
        self.resume_from = resume_from

    _environment_given = False

    @property
    def compute_target(self) -> Any:
        return self.run_config.target

    @property
    def environment(self) -> Any:
        return self.run_config.environment

    def _job(self) -> V1Job:
        run_config = self.run_config
        environment = run_config.environment if (self._environment_given or run_config.environment.name !=
                                                 "default-environment") else None
        return V1Job(source_directory=self.source_directory, script=self.script or run_config.script,
                     command=self.command or run_config.command, arguments=self.arguments or run_config.arguments,
                     compute_target=run_config.target, environment=environment,
                     distribution=self.distributed_job_config or run_config.distribution())

    def _submit(self, experiment: Any, tags: Any, origin: Any) -> Any:
        return submit(self._job(), experiment, origin, tags)
