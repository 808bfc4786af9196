"""azureml.train.estimator.Estimator: v1's generic estimator, compiled as ScriptRunConfig is (the
estimator keys land on mltrain's own: entry_script, script_params, use_gpu, pip/conda packages)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.core._compile import V1Job, submit
from azureml.exceptions import UserErrorException


class Mpi:
    def __init__(self, process_count_per_node: int = 1) -> None:
        self.process_count_per_node = process_count_per_node


class Nccl:
    def __init__(self) -> None:
        self.backend = "nccl"


class Gloo:
    def __init__(self) -> None:
        self.backend = "gloo"


class ParameterServer:
    def __init__(self, worker_count: int = 1, parameter_server_count: int = 1) -> None:
        self.worker_count, self.parameter_server_count = worker_count, parameter_server_count


class Estimator:
    _framework = "Estimator"

    def __init__(self, source_directory: str, *, compute_target: Any = None, vm_size: Optional[str] = None,
                 vm_priority: Optional[str] = None, entry_script: Optional[str] = None,
                 script_params: Optional[Dict[str, Any]] = None, node_count: int = 1,
                 process_count_per_node: int = 1, distributed_backend: Optional[str] = None,
                 distributed_training: Any = None, use_gpu: bool = False, use_docker: bool = True,
                 custom_docker_base_image: Optional[str] = None, custom_docker_image: Optional[str] = None,
                 image_registry_details: Any = None, user_managed: bool = False,
                 conda_packages: Optional[List[str]] = None, pip_packages: Optional[List[str]] = None,
                 conda_dependencies_file_path: Optional[str] = None, pip_requirements_file_path: Optional[str] = None,
                 conda_dependencies_file: Optional[str] = None, pip_requirements_file: Optional[str] = None,
                 environment_variables: Optional[Dict[str, str]] = None, environment_definition: Any = None,
                 inputs: Optional[List[Any]] = None, source_directory_data_store: Any = None,
                 shm_size: Optional[str] = None, resume_from: Any = None,
                 max_run_duration_seconds: Optional[int] = None, framework_version: Optional[str] = None,
                 **kwargs: Any) -> None:
        if entry_script is None:
            raise UserErrorException(f"{self._framework}: entry_script is required")
        if environment_definition is not None and (pip_packages or conda_packages or custom_docker_image
                                                   or conda_dependencies_file or pip_requirements_file):
            raise UserErrorException(f"{self._framework}: environment_definition excludes pip_packages, conda_packages, "
                                     "custom_docker_image and dependency files (Azure's rule)")
        self.source_directory = source_directory
        self.entry_script = entry_script
        self.script_params = dict(script_params or {})
        self.compute_target = compute_target
        self.node_count, self.process_count_per_node = node_count, process_count_per_node
        self.distributed_backend = distributed_backend
        self.distributed_training = distributed_training
        self.use_gpu = use_gpu
        self.pip_packages, self.conda_packages = list(pip_packages or []), list(conda_packages or [])
        self.environment_variables = dict(environment_variables or {})
        self.environment_definition = environment_definition
        self.user_managed = user_managed
        self.custom_docker_image = custom_docker_image or custom_docker_base_image
        self.conda_file = conda_dependencies_file or conda_dependencies_file_path
        self.pip_file = pip_requirements_file or pip_requirements_file_path
        self.framework_version = framework_version
        self.inputs = list(inputs or [])
        self.max_run_duration_seconds = max_run_duration_seconds

    def _distribution(self) -> Any:
        from azureml.core.runconfig import MpiConfiguration, PyTorchConfiguration, TensorflowConfiguration

        training = self.distributed_training
        backend = (self.distributed_backend or "").lower()
        if isinstance(training, Mpi) or backend == "mpi":
            per = training.process_count_per_node if isinstance(training, Mpi) else self.process_count_per_node
            return MpiConfiguration(process_count_per_node=per, node_count=self.node_count)
        if isinstance(training, (Nccl, Gloo)) or backend in ("nccl", "gloo"):
            name = training.backend if isinstance(training, (Nccl, Gloo)) else backend
            return PyTorchConfiguration(communication_backend=name.capitalize(),
                                        process_count=self.node_count * self.process_count_per_node,
                                        node_count=self.node_count)
        if isinstance(training, ParameterServer) or backend == "ps":
            ps = training if isinstance(training, ParameterServer) else ParameterServer(self.node_count)
            return TensorflowConfiguration(ps.worker_count, ps.parameter_server_count)
        if backend:
            raise UserErrorException(f"{self._framework}: distributed_backend '{self.distributed_backend}' is not "
                                     "supported (allowed: mpi, nccl, gloo, ps)")
        if self.node_count > 1 or self.process_count_per_node > 1:
            raise UserErrorException(f"{self._framework}: node_count/process_count_per_node above 1 need "
                                     "distributed_backend (mpi, nccl, gloo) or distributed_training")
        return None

    def _environment(self) -> Any:
        from azureml.core.environment import CondaDependencies, Environment

        if self.environment_definition is not None:
            return self.environment_definition
        env = Environment(f"{self._framework.lower()}-estimator")
        env.environment_variables = dict(self.environment_variables)
        if self.user_managed or not (self.pip_packages or self.conda_packages or self.conda_file or self.pip_file):
            # no packages asked for: the framework is the one this interpreter has
            env.python.user_managed_dependencies = True
        elif self.conda_file:
            env.python.conda_dependencies = CondaDependencies(self.conda_file)
        elif self.pip_file:
            env = Environment.from_pip_requirements(env.name, self.pip_file)
        else:
            env.python.conda_dependencies = CondaDependencies.create(pip_packages=self.pip_packages,
                                                                     conda_packages=self.conda_packages)
        if self.custom_docker_image:
            env.docker.enabled = True
            env.docker.base_image = self.custom_docker_image
        return env

    def _job(self) -> V1Job:
        arguments: List[Any] = []
        for key, value in self.script_params.items():  # Azure: each key, then its value unless it is ''
            arguments.append(key)
            if value is not None and value != "":
                arguments.append(value)
        values: Dict[str, Any] = {"job": {"use_gpu": True}} if self.use_gpu else {}
        data = {}
        for item in self.inputs:
            name = getattr(item, "name", None) or getattr(item, "data_reference_name", None)
            if name:
                data[str(name)] = item._mltrain_path()
        if data:
            values["inputs"] = data
        return V1Job(source_directory=self.source_directory, script=self.entry_script, arguments=arguments,
                     compute_target=self.compute_target, environment=self._environment(),
                     distribution=self._distribution(), values=values)

    def _submit(self, experiment: Any, tags: Any, origin: Any) -> Any:
        import warnings

        warnings.warn(f"{self._framework} estimators are deprecated by Azure ML (use ScriptRunConfig); mltrain runs "
                      "them as a ScriptRunConfig", DeprecationWarning, stacklevel=3)
        return submit(self._job(), experiment, origin, tags)

    @property
    def run_config(self) -> Any:
        from azureml.core.runconfig import RunConfiguration

        rc = RunConfiguration(script=self.entry_script)
        rc.target = self.compute_target
        rc.environment = self._environment()
        return rc


__all__ = ["Estimator", "Gloo", "Mpi", "Nccl", "ParameterServer"]
