"""The asset operations of mltrain's MLClient: `ml_client.models` on mltrain's model registry
(mltrain.models.registry), `ml_client.data` on `.mltrain/data/NAME.yaml`, `ml_client.components` on
`.mltrain/components/NAME.yml` and `ml_client.environments` on the curated and `.mltrain/environment/`
environments: the same files the v2 YAML front end resolves `azureml:NAME` through, so an asset
registered from a notebook is the one a job file (or a later job of the notebook) names.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from mltrain.azureml.sdk_v2 import azure_ai_ml_internals
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.config.paths import builtin_conf_dir
from mltrain.runs import mlflow_run

_JOB_ARTIFACT = re.compile(r"^azureml://jobs/([^/]+)/outputs/artifacts/paths/(.+?)/?$")
_JOB_OUTPUT = re.compile(r"^azureml://jobs/([^/]+)/outputs/([^/]+)/?$")


def _azure() -> Any:
    from mltrain.azureml.sdk_v2 import require_azure  # optional

    return require_azure()


def workspace_dir() -> Path:
    """The `.mltrain/` of this folder or the nearest one above (made here if there is none)."""
    here = Path.cwd()
    home = mltrain_home().resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".mltrain"
        if candidate.is_dir() and candidate.resolve() != home:
            return candidate
    return here / ".mltrain"


def _not_found(kind: str, name: str, where: str) -> Exception:
    return _azure().ResourceNotFoundError(f"{kind} {name} not found (mltrain: {where})")


def _version(value: Any) -> Optional[str]:
    return None if value in (None, "", "latest") else str(value)


# ------------------------------------------------------------------------------------------- models

class ModelOperations:
    def create_or_update(self, model: Any, **kwargs: Any) -> Any:
        """Register `model.path` (a local file or folder, or a job's output: `azureml://jobs/NAME/outputs/...`)
        as the next version of `model.name`."""
        try:
            registered = register_model(model, str(model.name))
        except MltrainError as exc:
            raise _azure().ValidationException(message=str(exc), no_personal_data_message="model not registered") from None
        return self._entity(registered, getattr(model, "type", None))

    def get(self, name: str, version: Optional[str] = None, label: Optional[str] = None, **kwargs: Any) -> Any:
        from mltrain.models.registry import Model as Registered  # heavy

        try:
            found = Registered(name, int(version) if _version(version) else None)
        except MltrainError as exc:
            raise _not_found("Model", f"{name}:{version or 'latest'}", str(exc)) from None
        return self._entity(found)

    def list(self, name: Optional[str] = None, **kwargs: Any) -> List[Any]:
        from mltrain.models.registry import Model as Registered  # heavy

        return [self._entity(m) for m in Registered.list(name=name, latest=name is None)]

    def package(self, name: str, version: str, package_request: Any = None, **kwargs: Any) -> Any:
        """Azure's model package (an image it builds with the model and its environment) is refused in one line."""
        raise _azure().ValidationException(
            message=f"ml_client.models.package({name}, {version}): a model package is a container image Azure builds "
                    "to deploy from; mltrain serves a registered model itself: give a deployment the model and its "
                    "environment (ManagedOnlineDeployment(model=..., environment=...))",
            no_personal_data_message="model packages are not available in mltrain")

    def download(self, name: str, version: str, download_path: str = ".", **kwargs: Any) -> None:
        """Azure's layout: the version's files under download_path/NAME/."""
        from mltrain.models.registry import Model as Registered  # heavy

        Registered(name, int(version)).download(os.path.join(download_path, name), exist_ok=True)

    @staticmethod
    def _entity(registered: Any, kind: Optional[str] = None) -> Any:
        from azure.ai.ml.entities import Model  # optional

        kind = kind or ("mlflow_model" if registered.framework == "MLflow" else "custom_model")
        return Model(name=registered.name, version=str(registered.version), path=registered.source, type=kind,
                     description=registered.description or None, tags=dict(registered.tags),
                     properties=dict(registered.properties))


def register_model(model: Any, name: str) -> Any:
    """A Model entity's files registered in mltrain's registry as the next version of `name`
    (mltrain.models.registry.Model); raises MltrainError in one line."""
    from mltrain.models.registry import Model as Registered  # heavy

    run, path = _model_source(str(model.path))
    return Registered.register(name, path, run=run, tags={str(k): str(v) for k, v in (model.tags or {}).items()},
                               properties=dict(model.properties or {}), description=model.description)


def _model_source(path: str) -> tuple:
    """(run, path inside it) for a job's output, (None, local path) otherwise."""
    for pattern, inside in ((_JOB_ARTIFACT, "{}"), (_JOB_OUTPUT, "outputs/{}")):
        found = pattern.match(path)
        if found:
            job, rel = found.group(1), found.group(2)
            run_dir = mltrain_home() / "runs" / job
            rel = inside.format(rel)
            if not (run_dir / rel).exists():  # an artifact: the job's outputs, or what its scripts logged to MLflow
                where = [run_dir / "outputs"] + (mlflow_run.artifact_folders(run_dir) if pattern is _JOB_ARTIFACT else [])
                found_in = next((w for w in where if (w / rel).exists()), None)
                if found_in is not None:
                    rel = (found_in / rel).relative_to(run_dir).as_posix()
            return job, rel
    if path.startswith("azureml:") or "://" in path:
        raise _azure().ValidationException(message=f"model path '{path}': mltrain registers local files and folders "
                                                   "and job outputs (azureml://jobs/NAME/outputs/...)",
                                           no_personal_data_message="model path")
    return None, os.path.abspath(path)


# --------------------------------------------------------------------------------------------- data

class DataOperations:
    """Data assets as `.mltrain/data/NAME.yaml` (Azure's data asset YAML: name, version, type, path)."""

    def create_or_update(self, data: Any, **kwargs: Any) -> Any:
        path = str(data.path)
        if not (path.startswith("azureml:") or "://" in path):
            path = os.path.abspath(os.path.join(azure_ai_ml_internals.base_path(data), path))
        previous = self._read(data.name)
        version = str(data.version or (int(previous.get("version", 0)) + 1 if previous and
                                       str(previous.get("version", "")).isdigit() else 1))
        doc: Dict[str, Any] = {"name": data.name, "version": version, "type": str(data.type or "uri_folder"),
                               "path": path}
        if data.description:
            doc["description"] = data.description
        target = workspace_dir() / "data" / f"{data.name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# an Azure ML data asset, registered from azure-ai-ml (mltrain)\n"
                          + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return self.get(data.name)

    def get(self, name: str, version: Optional[str] = None, label: Optional[str] = None, **kwargs: Any) -> Any:
        from azure.ai.ml.entities import Data  # optional

        doc = self._read(name)
        if doc is None:
            raise _not_found("Data", name, f"no {workspace_dir() / 'data' / (name + '.yaml')}")
        return Data(name=name, version=str(doc.get("version", "1")), path=str(doc["path"]),
                    type=str(doc.get("type", "uri_folder")), description=doc.get("description"))

    def list(self, name: Optional[str] = None, **kwargs: Any) -> List[Any]:
        folder = workspace_dir() / "data"
        names = sorted(p.stem for p in folder.glob("*.y*ml")) if folder.is_dir() else []
        return [self.get(n) for n in names if name is None or n == name]

    @staticmethod
    def _read(name: str) -> Optional[Dict[str, Any]]:
        for suffix in (".yaml", ".yml"):
            file = workspace_dir() / "data" / f"{name}{suffix}"
            if file.is_file():
                return dict(yaml.safe_load(file.read_text(encoding="utf-8")) or {})
        return None


# --------------------------------------------------------------------------------------- components

class ComponentOperations:
    """Components as `.mltrain/components/NAME.yml` (what `component: azureml:NAME@latest` resolves to)."""

    def __init__(self) -> None:
        self._pipelines: Dict[str, Any] = {}

    def create_or_update(self, component: Any, **kwargs: Any) -> Any:
        from mltrain.azureml.sdk_v2.entities import component_text  # startup

        component = azure_ai_ml_internals.as_component(component)
        if type(component).__name__ == "PipelineComponent":
            # kept in this process (a pipeline that calls it runs its steps as its own, sdk_v2.nested); the
            # YAML front end has no pipeline component files to register it in
            self._pipelines[str(component.name)] = component
            return component
        target = workspace_dir() / "components" / f"{component.name}.yml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(component_text(component), encoding="utf-8")
        return self.get(component.name)

    def get(self, name: str, version: Optional[str] = None, label: Optional[str] = None, **kwargs: Any) -> Any:
        if name in self._pipelines:
            return self._pipelines[name]
        for suffix in (".yml", ".yaml"):
            file = workspace_dir() / "components" / f"{name}{suffix}"
            if file.is_file():
                return _azure().load_component(str(file))
        raise _not_found("Component", name, f"no {workspace_dir() / 'components' / (name + '.yml')}")

    def list(self, name: Optional[str] = None, **kwargs: Any) -> List[Any]:
        folder = workspace_dir() / "components"
        names = sorted({p.stem for p in folder.glob("*.y*ml")}) if folder.is_dir() else []
        return [self.get(n) for n in names if name is None or n == name]


# ------------------------------------------------------------------------------------- environments

def environment_file(name: str) -> Optional[Path]:
    """The file of a curated environment (NAME or AzureML-NAME) or of the workspace's own, or None."""
    for base in (workspace_dir(), builtin_conf_dir()):
        for candidate in (name, f"AzureML-{name}"):
            if (base / "environment" / f"{candidate}.yaml").is_file():
                return base / "environment" / f"{candidate}.yaml"
    return None


class EnvironmentOperations:
    """Curated environments (mltrain's catalog) and the workspace's own (`.mltrain/environment/NAME.yaml`)."""

    def get(self, name: str, version: Optional[str] = None, label: Optional[str] = None, **kwargs: Any) -> Any:
        from azure.ai.ml.entities import Environment  # optional

        file = environment_file(name)
        if file is not None:
            return Environment(name=name, version=str(version or "1"),
                               description=f"mltrain environment {file.stem} ({file.parent})")
        raise _not_found("Environment", name, f"not curated and no {workspace_dir() / 'environment' / (name + '.yaml')}; "
                                              "`mltrain env list` shows the curated ones")

    def list(self, **kwargs: Any) -> List[Any]:
        names = set()
        for base in (workspace_dir(), builtin_conf_dir()):
            names |= {p.stem for p in (base / "environment").glob("*.yaml")} if (base / "environment").is_dir() else set()
        return [self.get(n) for n in sorted(names)]

    def create_or_update(self, environment: Any, **kwargs: Any) -> Any:
        """An environment of a conda file (and a Python or Azure base image) as `.mltrain/environment/NAME.yaml`:
        a virtual environment built on this host's Python from the conda file's pip packages."""
        conda = getattr(environment, "conda_file", None)
        image = getattr(environment, "image", None)
        if conda is None:
            raise _azure().ValidationException(
                message=f"environment {environment.name}: mltrain registers environments of a conda_file (image "
                        f"{image or 'none'} alone runs only on Slurm with a container runtime: name it in the job's "
                        "environment instead)", no_personal_data_message="environment")
        spec = conda if isinstance(conda, dict) else yaml.safe_load(Path(str(conda)).read_text(encoding="utf-8"))
        deps = [d for d in spec.get("dependencies") or [] if not (isinstance(d, str) and re.match(r"^python\s*[=<>]", d))]
        # what a job file's inline environment becomes (mltrain.azureml.references._conda_environment)
        doc = {"name": environment.name, "python": {"user_managed": False},
               "conda": {"channels": list(spec.get("channels") or []), "dependencies": deps}}
        target = workspace_dir() / "environment" / f"{environment.name}.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("# an Azure ML environment, registered from azure-ai-ml (mltrain)\n"
                          + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        return self.get(environment.name)
