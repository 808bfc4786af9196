"""`Environment`: Azure's environments as mltrain's `environment` group.

A curated name (`Environment.get(ws, 'AzureML-PyTorch-1.6-GPU')`, the v1-era names and today's
`AzureML-acpt-pytorch-*`) is the curated option of the same name; an environment built here
(`from_conda_specification`, `from_pip_requirements`, `from_docker_image`, or by setting `python.*` /
`docker.*`) becomes that option's values: its conda or pip packages built into a cached virtual
environment on this host, `python.user_managed_dependencies=True` running in an interpreter you
manage, a Docker image run on Slurm (pyxis or apptainer). Azure ML's own base images (an OS, MPI and
conda under mcr.microsoft.com/azureml/) carry no packages of their own: with a conda file, the job runs
on this host in the environment built from it, as the v2 front end does.
"""
from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from azureml.exceptions import UserErrorException

DEFAULT_CPU_IMAGE = "mcr.microsoft.com/azureml/openmpi3.1.2-ubuntu18.04"
DEFAULT_GPU_IMAGE = "mcr.microsoft.com/azureml/openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04"
AZUREML_IMAGES = "mcr.microsoft.com/azureml/"
#: Azure's current curated PyTorch families: (azureml-)acpt-pytorch-<torch>-cuda<cuda>
ACPT = re.compile(r"(?i)^(?:azureml-)?acpt-pytorch-(\d+\.\d+)-cuda[\d.]+$")


class CondaDependencies:
    """azureml.core.conda_dependencies.CondaDependencies: a conda environment as a mapping."""

    def __init__(self, conda_dependencies_file_path: Optional[str] = None, _underlying_structure: Any = None) -> None:
        if conda_dependencies_file_path:
            import yaml  # submission

            self._data = yaml.safe_load(Path(conda_dependencies_file_path).read_text(encoding="utf-8")) or {}
        else:
            self._data = copy.deepcopy(_underlying_structure) if _underlying_structure else {
                "name": "project_environment", "dependencies": [], "channels": ["conda-forge"]}

    @staticmethod
    def create(pip_packages: Optional[List[str]] = None, conda_packages: Optional[List[str]] = None,
               python_version: Optional[str] = None, pin_sdk_version: bool = True) -> CondaDependencies:
        deps = CondaDependencies()
        for package in conda_packages or []:
            deps.add_conda_package(package)
        for package in pip_packages or []:
            deps.add_pip_package(package)
        return deps

    def _pip(self) -> List[str]:
        for dep in self._data.setdefault("dependencies", []):
            if isinstance(dep, dict) and "pip" in dep:
                return dep["pip"]  # type: ignore[no-any-return]
        entry: Dict[str, List[str]] = {"pip": []}
        self._data["dependencies"].append(entry)
        return entry["pip"]

    def add_pip_package(self, pip_package: str) -> None:
        if pip_package not in self._pip():
            self._pip().append(pip_package)

    def add_conda_package(self, conda_package: str) -> None:
        deps = self._data.setdefault("dependencies", [])
        if conda_package not in deps:
            deps.insert(0, conda_package)

    def set_pip_option(self, pip_option: str) -> None:
        self.add_pip_package(pip_option)

    @property
    def pip_packages(self) -> List[str]:
        return list(self._pip())

    @property
    def conda_packages(self) -> List[str]:
        return [d for d in self._data.get("dependencies", []) if isinstance(d, str)]

    def serialize_to_string(self) -> str:
        import yaml  # submission

        return str(yaml.safe_dump(self._data, sort_keys=False))

    def save(self, path: str) -> str:
        Path(path).write_text(self.serialize_to_string(), encoding="utf-8")
        return path

    save_to_file = save

    def as_dict(self) -> Dict[str, Any]:
        return copy.deepcopy(self._data)


class PythonSection:
    def __init__(self) -> None:
        self.user_managed_dependencies = False
        self.interpreter_path = "python"
        self.conda_dependencies: Optional[CondaDependencies] = None
        self.conda_dependencies_file: Optional[str] = None
        self.base_conda_environment: Optional[str] = None


class DockerSection:
    def __init__(self) -> None:
        self.enabled = False
        self.base_image: Optional[str] = DEFAULT_CPU_IMAGE
        self.base_dockerfile: Optional[str] = None
        self.shm_size: Optional[str] = None
        self.arguments: List[str] = []
        self.base_image_registry = None


class SparkSection:
    """Spark settings: kept, used by nothing here (mltrain runs no Spark)."""

    def __init__(self) -> None:
        self.repositories: List[str] = []
        self.packages: List[Any] = []
        self.precache_packages = True


class Environment:
    """An Azure ML environment; `name` starting with `AzureML` is reserved for curated ones."""

    def __init__(self, name: str, _skip_validation: bool = False) -> None:
        self.name = name
        self.version: Optional[str] = None
        self.python = PythonSection()
        self.docker = DockerSection()
        self.spark = SparkSection()
        self.r: Any = None
        self.environment_variables: Dict[str, str] = {"EXAMPLE_ENV_VAR": "EXAMPLE_VALUE"}
        self.pip_requirements: Optional[str] = None
        self.inferencing_stack_version: Optional[str] = None
        self._curated: Optional[Dict[str, Any]] = None  # the catalog's spec, while unmodified

    # ------------------------------------------------------------------ making one
    @staticmethod
    def get(workspace: Any, name: str, version: Optional[str] = None, label: Optional[str] = None) -> Environment:
        from mltrain.environments.catalog import CURATED  # submission

        by_lower = {k.lower(): k for k in CURATED}
        curated = by_lower.get(name.lower()) or by_lower.get(f"azureml-{name}".lower())
        if curated is not None:  # Azure's names are matched without regard to case
            return Environment._from_curated(curated, CURATED[curated])
        family = ACPT.match(name)
        if family is not None:
            return Environment._acpt(name, family.group(1))
        saved = _registered(workspace).get(name)
        if saved is not None:
            return Environment.load_from_directory(str(saved))
        from difflib import get_close_matches

        close = get_close_matches(name, [*CURATED, *_registered(workspace)], n=3, cutoff=0.5)
        raise UserErrorException(f"Environment '{name}' was not found: it is not curated and not registered in "
                                 f"{_registry_dir(workspace)}" + (f" (closest: {', '.join(close)})" if close else ""))

    @staticmethod
    def _from_curated(name: str, spec: Dict[str, Any]) -> Environment:
        env = Environment(name)
        env.version = "1"
        env.environment_variables = {}
        if spec.get("conda"):
            env.python.conda_dependencies = CondaDependencies(_underlying_structure=spec["conda"])
        image = (spec.get("docker") or {}).get("base_image") or spec.get("azure_image")
        if image:
            env.docker.enabled = True
            env.docker.base_image = image
        env._curated = _state(env)
        return env

    @staticmethod
    def _acpt(name: str, torch: str) -> Environment:
        """Azure's `acpt-pytorch-<torch>-cuda<cuda>` family (its Python 3.10 images carry that torch and a
        matching torchvision): built on this host from those packages, as the catalog's acpt entry is."""
        env = Environment(name)
        env.version = "1"
        env.environment_variables = {}
        env.python.conda_dependencies = CondaDependencies.create(pip_packages=[f"torch=={torch}.*", "torchvision"])
        return env

    @staticmethod
    def from_conda_specification(name: str, file_path: str) -> Environment:
        if not os.path.isfile(file_path):
            raise UserErrorException(f"Conda specification file {file_path} does not exist")
        env = Environment(name)
        env.python.conda_dependencies = CondaDependencies(file_path)
        return env

    @staticmethod
    def from_pip_requirements(name: str, file_path: str, pip_version: Optional[str] = None) -> Environment:
        if not os.path.isfile(file_path):
            raise UserErrorException(f"Requirements file {file_path} does not exist")
        env = Environment(name)
        lines = [ln.strip() for ln in Path(file_path).read_text(encoding="utf-8").splitlines()]
        env.python.conda_dependencies = CondaDependencies.create(
            pip_packages=[ln for ln in lines if ln and not ln.startswith("#")])
        return env

    @staticmethod
    def from_docker_image(name: str, image: str, container_registry: Any = None,
                          conda_specification: Optional[str] = None,
                          pip_requirements: Optional[str] = None) -> Environment:
        env = (Environment.from_conda_specification(name, conda_specification) if conda_specification else
               Environment.from_pip_requirements(name, pip_requirements) if pip_requirements else Environment(name))
        env.docker.enabled = True
        env.docker.base_image = image
        if not conda_specification and not pip_requirements:
            env.python.user_managed_dependencies = True
        return env

    @staticmethod
    def from_dockerfile(name: str, dockerfile: str, **kwargs: Any) -> Environment:
        from azureml.core._bridge import unsupported

        unsupported("Environment.from_dockerfile", "build the image yourself (docker build) and use "
                                                   "Environment.from_docker_image on a Slurm compute")

    def clone(self, new_name: str) -> Environment:
        env = copy.deepcopy(self)
        env.name = new_name
        env.version = None
        env._curated = None
        return env

    def add_private_pip_wheel(self, workspace: Any, file_path: str, exist_ok: bool = False) -> str:
        return os.path.abspath(file_path)  # a local wheel is installed from where it is

    # ------------------------------------------------------------------ files
    def save_to_directory(self, path: str, overwrite: bool = False) -> None:
        folder = Path(path)
        if folder.exists() and any(folder.iterdir()) and not overwrite:
            raise UserErrorException(f"Directory {path} already exists and is not empty (overwrite=True replaces it)")
        folder.mkdir(parents=True, exist_ok=True)
        definition = {"name": self.name, "version": self.version, "environmentVariables": self.environment_variables,
                      "python": {"userManagedDependencies": self.python.user_managed_dependencies,
                                 "interpreterPath": self.python.interpreter_path},
                      "docker": {"enabled": self.docker.enabled, "baseImage": self.docker.base_image}}
        (folder / "azureml_environment.json").write_text(json.dumps(definition, indent=4) + "\n", encoding="utf-8")
        if self.python.conda_dependencies is not None:
            self.python.conda_dependencies.save(str(folder / "conda_dependencies.yml"))

    @staticmethod
    def load_from_directory(path: str) -> Environment:
        folder = Path(path)
        definition_file = folder / "azureml_environment.json"
        if not definition_file.is_file():
            raise UserErrorException(f"{path} holds no azureml_environment.json (save_to_directory writes one)")
        data = json.loads(definition_file.read_text(encoding="utf-8"))
        env = Environment(str(data.get("name") or folder.name))
        env.version = data.get("version")
        env.environment_variables = dict(data.get("environmentVariables") or {})
        python = data.get("python") or {}
        env.python.user_managed_dependencies = bool(python.get("userManagedDependencies"))
        env.python.interpreter_path = python.get("interpreterPath") or "python"
        docker = data.get("docker") or {}
        env.docker.enabled = bool(docker.get("enabled"))
        env.docker.base_image = docker.get("baseImage")
        if (folder / "conda_dependencies.yml").is_file():
            env.python.conda_dependencies = CondaDependencies(str(folder / "conda_dependencies.yml"))
        return env

    def register(self, workspace: Any) -> Environment:
        if self.name.startswith("AzureML"):
            raise UserErrorException("Environment names starting with 'AzureML' are reserved for curated "
                                     "environments; clone it with a new name first")
        folder = _registry_dir(workspace) / self.name
        self.version = str(int(self.version or 0) + 1) if folder.exists() else (self.version or "1")
        self.save_to_directory(str(folder), overwrite=True)
        return self

    @staticmethod
    def list(workspace: Any) -> Dict[str, Environment]:
        from mltrain.environments.catalog import CURATED  # submission

        envs = {name: Environment._from_curated(name, spec) for name, spec in CURATED.items()}
        for name, folder in _registered(workspace).items():
            envs[name] = Environment.load_from_directory(str(folder))
        return envs

    def build(self, workspace: Any, image_build_compute: Any = None) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Environment.build", "mltrain builds an environment when a run first uses it "
                                         "(`mltrain env show NAME` shows it)")

    def build_local(self, workspace: Any, platform: Any = None, **kwargs: Any) -> None:
        pass  # built when first used

    def get_image_details(self, workspace: Any) -> Dict[str, Any]:
        return {"dockerImage": {"name": self.docker.base_image}}

    # ------------------------------------------------------------------ to mltrain
    def to_mltrain(self) -> Tuple[str, Dict[str, Any]]:
        """(the `environment=` option, values over it) for this environment as it is now."""
        if self._curated is not None and _state(self) == self._curated:
            return self.name, {}
        values: Dict[str, Any] = {"name": self.name}
        if self.environment_variables and self.environment_variables != {"EXAMPLE_ENV_VAR": "EXAMPLE_VALUE"}:
            values["environment_variables"] = {str(k): str(v) for k, v in self.environment_variables.items()}
        image = self.docker.base_image if self.docker.enabled else None
        if image and not image.startswith(AZUREML_IMAGES):
            values["docker"] = {"base_image": image}
        if self.python.user_managed_dependencies:
            interpreter = self.python.interpreter_path
            values["python"] = {"user_managed": True}
            values["check"] = "warn"  # Azure never checks a user-managed environment's packages; mltrain says what differs
            if interpreter and interpreter != "python":
                values["python"]["interpreter"] = interpreter
            return "current", values
        values["python"] = {"user_managed": False}
        if self.python.conda_dependencies is not None:
            values["conda"] = self.python.conda_dependencies.as_dict()
        return "current", values

    def __repr__(self) -> str:
        return json.dumps({"name": self.name, "version": self.version,
                           "python": {"userManagedDependencies": self.python.user_managed_dependencies},
                           "docker": {"enabled": self.docker.enabled, "baseImage": self.docker.base_image}}, indent=4)


def _state(env: Environment) -> Any:
    deps = env.python.conda_dependencies.as_dict() if env.python.conda_dependencies else None
    return (env.python.user_managed_dependencies, env.python.interpreter_path, deps, env.docker.enabled,
            env.docker.base_image, dict(env.environment_variables))


def _registry_dir(workspace: Any) -> Path:
    return Path(workspace.config_dir) / "environments"


def _registered(workspace: Any) -> Dict[str, Path]:
    folder = _registry_dir(workspace) if workspace is not None else None
    if folder is None or not folder.is_dir():
        return {}
    return {p.name: p for p in sorted(folder.iterdir()) if (p / "azureml_environment.json").is_file()}
