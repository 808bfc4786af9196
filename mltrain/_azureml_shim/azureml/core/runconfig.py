"""azureml.core.runconfig: how a v1 job is distributed, as mltrain's `distribution` group.

PyTorchConfiguration is `distribution=pytorch` (process_count is Azure's total over all nodes),
MpiConfiguration `distribution=mpi` (one mpirun, or srun's PMI on Slurm; Horovod scripts run under it
as they are), TensorflowConfiguration workers as ranks with TF_CONFIG (parameter servers are refused,
as the v2 front end refuses them).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.core.environment import DEFAULT_CPU_IMAGE, DEFAULT_GPU_IMAGE, CondaDependencies
from azureml.exceptions import RunConfigurationException


class PyTorchConfiguration:
    def __init__(self, communication_backend: str = "Nccl", process_count: Optional[int] = None,
                 node_count: int = 1) -> None:
        self.communication_backend = communication_backend
        self.process_count = process_count
        self.node_count = node_count

    def to_mltrain(self) -> Dict[str, Any]:
        nodes = _positive("PyTorchConfiguration.node_count", self.node_count)
        total = _positive("PyTorchConfiguration.process_count", self.process_count or nodes)
        if total % nodes:
            raise RunConfigurationException(f"PyTorchConfiguration: process_count={total} does not split evenly over "
                                            f"node_count={nodes} (it is the total over all nodes)")
        backend = str(self.communication_backend or "Nccl").lower()
        if backend not in ("nccl", "gloo"):
            raise RunConfigurationException(f"PyTorchConfiguration.communication_backend '{self.communication_backend}'"
                                            " is not supported (allowed: Nccl, Gloo)")
        return {"kind": "pytorch", "node_count": nodes, "process_count_per_node": total // nodes, "backend": backend}


class MpiConfiguration:
    def __init__(self, process_count_per_node: int = 1, node_count: int = 1) -> None:
        self.process_count_per_node = process_count_per_node
        self.node_count = node_count

    def to_mltrain(self) -> Dict[str, Any]:
        return {"kind": "mpi", "node_count": _positive("MpiConfiguration.node_count", self.node_count),
                "process_count_per_node": _positive("MpiConfiguration.process_count_per_node",
                                                    self.process_count_per_node)}


class TensorflowConfiguration:
    def __init__(self, worker_count: int = 1, parameter_server_count: int = 1) -> None:
        self.worker_count = worker_count
        self.parameter_server_count = parameter_server_count

    def to_mltrain(self) -> Dict[str, Any]:
        if self.parameter_server_count:
            raise RunConfigurationException(
                f"TensorflowConfiguration.parameter_server_count={self.parameter_server_count}: parameter servers are "
                "not supported; mltrain starts workers only (MultiWorkerMirroredStrategy): set parameter_server_count=0")
        workers = _positive("TensorflowConfiguration.worker_count", self.worker_count)
        return {"kind": "pytorch", "node_count": 1, "process_count_per_node": workers, "tf_config": True}


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RunConfigurationException(f"{name}={value!r} is invalid; must be an integer >= 1")
    return value


class DockerConfiguration:
    def __init__(self, use_docker: bool = False, arguments: Optional[List[str]] = None,
                 shared_volumes: bool = True, shm_size: Optional[str] = None) -> None:
        self.use_docker, self.arguments = use_docker, list(arguments or [])
        self.shared_volumes, self.shm_size = shared_volumes, shm_size


class RunConfiguration:
    """The v1 run configuration: what ScriptRunConfig(run_config=...) and the pipeline steps read."""

    def __init__(self, script: Optional[str] = None, arguments: Optional[List[Any]] = None,
                 framework: Optional[str] = None, communicator: Optional[str] = None,
                 conda_dependencies: Any = None, _history_enabled: Any = None, _path: Any = None,
                 _name: Any = None, command: Any = None) -> None:
        from azureml.core.environment import Environment

        self.script = script
        self.arguments = list(arguments or [])
        self.command = command
        self.framework = framework or "Python"
        self.communicator = communicator or "None"
        self.target = "local"
        self.node_count = 1
        self.max_run_duration_seconds: Optional[int] = None
        self.environment = Environment("default-environment")
        if conda_dependencies is not None:
            self.environment.python.conda_dependencies = conda_dependencies
        self.environment_variables: Dict[str, str] = {}
        self.docker = DockerConfiguration()
        self.mpi = MpiConfiguration()
        self.pytorch = PyTorchConfiguration()
        self.tensorflow = TensorflowConfiguration()
        self.data: Dict[str, Any] = {}
        self.output_data: Dict[str, Any] = {}

    def distribution(self) -> Optional[Any]:
        """The distribution the communicator names (Azure: `communicator='IntelMpi'|'OpenMpi'|...`)."""
        name = str(self.communicator or "None").lower()
        if name in ("intelmpi", "openmpi", "mpi"):
            self.mpi.node_count = self.node_count
            return self.mpi
        if name in ("pytorch", "nccl", "gloo"):
            self.pytorch.node_count = self.node_count
            return self.pytorch
        if name == "parameterserver":
            return self.tensorflow
        return None

    def save(self, path: Optional[str] = None, name: Optional[str] = None, separate_environment_yaml: bool = False
             ) -> None:
        from azureml.core._bridge import unsupported

        unsupported("RunConfiguration.save", "keep the ScriptRunConfig in your control script, or write the job "
                                             "as a v2 YAML file for `mltrain job create --file`")

    @staticmethod
    def load(path: str, name: Optional[str] = None) -> RunConfiguration:
        from azureml.core._bridge import unsupported

        unsupported("RunConfiguration.load", "build the RunConfiguration in Python")


class _Library:
    """Databricks libraries: accepted where a run configuration names them, used by nothing here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs


class JarLibrary(_Library):
    pass


class EggLibrary(_Library):
    pass


class PyPiLibrary(_Library):
    pass


class MavenLibrary(_Library):
    pass


class CranLibrary(_Library):
    pass


class RLibrary(_Library):
    pass


__all__ = ["DEFAULT_CPU_IMAGE", "DEFAULT_GPU_IMAGE", "CondaDependencies", "CranLibrary", "DockerConfiguration",
           "EggLibrary", "JarLibrary", "MavenLibrary", "MpiConfiguration", "PyPiLibrary", "PyTorchConfiguration",
           "RLibrary", "RunConfiguration", "TensorflowConfiguration"]
