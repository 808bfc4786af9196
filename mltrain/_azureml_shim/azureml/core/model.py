"""`Model`: Azure's model registry on mltrain's (MLflow's registry under mltrain's home: `mltrain models ...`
shows the same versions). `Model.deploy` serves models on this machine (azureml.core.webservice: an ACI, AKS or
local service is an mltrain endpoint of the same name); what needs Azure's container registry (`Model.package`,
an InferenceConfig's own Docker steps) is refused in one line.

Inside a deployment (the server sets AZUREML_MODEL_DIR) `Model.get_model_path` answers from the deployed models'
folder, as Azure's does in its containers: `$AZUREML_MODEL_DIR/<file>` for one model, and
`$AZUREML_MODEL_DIR/<name>/<version>/<file>` for several."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from azureml.exceptions import ModelNotFoundException, UserErrorException, WebserviceException

DEPLOY_INSTEAD = ("mltrain serves models on this machine with Model.deploy (ACI, AKS and local services alike; "
                  "`mltrain endpoints list` shows them); building or pushing a Docker image needs Azure's container "
                  "registry")
MODEL_DIR_ENV = "AZUREML_MODEL_DIR"
AZUREML_IMAGES = "mcr.microsoft.com/azureml/"


def _registry() -> Any:
    from mltrain.models.registry import Model as Registered  # submission

    return Registered


def _errors() -> Any:
    from mltrain.base.errors import MltrainError  # submission

    return MltrainError


class Model:
    class Framework:
        CUSTOM, PYTORCH, ONNX, TENSORFLOW, SCIKITLEARN = "Custom", "PyTorch", "Onnx", "TensorFlow", "ScikitLearn"

    def __init__(self, workspace: Any = None, name: Optional[str] = None, id: Optional[str] = None,
                 tags: Any = None, properties: Any = None, version: Optional[int] = None, run_id: Optional[str] = None,
                 model_framework: Optional[str] = None, expand: bool = True, sub_folder: Optional[str] = None,
                 _registered: Any = None) -> None:
        if id is not None and name is None:
            name, _, v = id.partition(":")
            version = int(v) if v else version
        self.workspace = workspace
        if _registered is None:
            if name is None:
                raise UserErrorException("Model() needs name= (or id='name:version')")
            try:
                _registered = _registry()(name, version)
            except _errors() as exc:
                raise ModelNotFoundException(str(exc)) from None
        self._m = _registered
        self.name, self.version = _registered.name, _registered.version
        self.id = f"{self.name}:{self.version}"
        self.tags, self.properties = dict(_registered.tags), dict(_registered.properties)
        self.description = _registered.description
        self.run_id = _registered.run_id
        self.model_framework = _registered.framework
        self.created_time = _registered.created_time
        self.url = _registered.source

    @classmethod
    def _wrap(cls, workspace: Any, registered: Any) -> Model:
        return cls(workspace, _registered=registered)

    @staticmethod
    def register(workspace: Any, model_path: str, model_name: str, tags: Optional[Dict[str, str]] = None,
                 properties: Optional[Dict[str, str]] = None, description: Optional[str] = None,
                 datasets: Any = None, model_framework: Optional[str] = None,
                 model_framework_version: Optional[str] = None, child_paths: Any = None,
                 sample_input_dataset: Any = None, sample_output_dataset: Any = None,
                 resource_configuration: Any = None, **kwargs: Any) -> Model:
        try:
            registered = _registry().register(model_name, model_path, tags=tags, properties=properties,
                                              description=description)
        except _errors() as exc:
            raise UserErrorException(str(exc)) from None
        return Model._wrap(workspace, registered)

    @staticmethod
    def list(workspace: Any, name: Optional[str] = None, tags: Any = None, properties: Any = None,
             run_id: Optional[str] = None, latest: bool = False, **kwargs: Any) -> List[Model]:
        filters = [t if isinstance(t, str) else "=".join(map(str, t)) for t in (tags or [])]
        models = [Model._wrap(workspace, m) for m in _registry().list(name=name, tags=filters, latest=latest)]
        return [m for m in models if run_id is None or m.run_id == run_id]

    @staticmethod
    def get_model_path(model_name: str, version: Optional[int] = None, _workspace: Any = None) -> str:
        if version is not None and not isinstance(version, int):
            raise WebserviceException("version should be an int")
        deployed = os.environ.get(MODEL_DIR_ENV)
        if deployed:
            return _deployed_path(deployed, model_name, version)
        try:
            return str(_registry()(model_name, version).source)
        except _errors() as exc:
            raise ModelNotFoundException(str(exc)) from None

    def download(self, target_dir: str = ".", exist_ok: bool = False, exists_ok: Optional[bool] = None) -> str:
        try:
            return str(self._m.download(target_dir, exist_ok=exist_ok if exists_ok is None else exists_ok))
        except _errors() as exc:
            raise UserErrorException(str(exc)) from None

    def add_tags(self, tags: Dict[str, str]) -> None:
        self._m.add_tags(tags)
        self.tags.update({str(k): str(v) for k, v in tags.items()})

    def remove_tags(self, tags: List[str]) -> None:
        self._m.remove_tags(tags)
        for key in tags:
            self.tags.pop(key, None)

    def add_properties(self, properties: Dict[str, str]) -> None:
        try:
            self._m.add_properties(properties)
        except _errors() as exc:
            raise UserErrorException(str(exc)) from None
        self.properties.update({str(k): str(v) for k, v in properties.items()})

    def serialize(self) -> Dict[str, Any]:
        return dict(self._m.to_json(), id=self.id)

    @staticmethod
    def deploy(workspace: Any, name: str, models: List[Any], inference_config: Optional[InferenceConfig] = None,
               deployment_config: Any = None, deployment_target: Any = None, overwrite: bool = False,
               show_output: bool = False) -> Any:
        """A service on this machine (AciWebservice by default, as Azure's default target is ACI); a scoring
        script whose init() fails leaves a service in state Failed: wait_for_deployment() raises its error."""
        from azureml.core.webservice.webservice import deploy_service

        return deploy_service(workspace, name, models, inference_config, deployment_config, deployment_target,
                              overwrite, show_output)

    @staticmethod
    def package(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Model.package", "it builds a Docker image in Azure's container registry; serve the model on this "
                                     "machine with Model.deploy (LocalWebservice.deploy_configuration(port=...) for a "
                                     "fixed port)")

    @staticmethod
    def profile(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Model.profile", "it measures a service in Azure's cloud; deploy the model with Model.deploy and "
                                     "time service.run(...) on this machine")

    def __repr__(self) -> str:
        return f"Model(workspace={getattr(self.workspace, 'name', None)!r}, name={self.name}, id={self.id}, " \
               f"version={self.version}, tags={self.tags}, properties={self.properties})"


def _deployed_path(model_dir: str, name: str, version: Optional[int]) -> str:
    """Azure's rule inside a deployment: azureml-models/<name>/<version> holds one file or folder, the model."""
    base = Path(model_dir)
    if base.name.isdigit() and base.parent.name == name:  # one model: AZUREML_MODEL_DIR is its version's folder
        versions = {base.name: model_dir}
    elif (base / name).is_dir():  # several: AZUREML_MODEL_DIR holds <name>/<version>/ for each
        versions = {p.name: os.path.join(model_dir, name, p.name) for p in (base / name).iterdir() if p.is_dir()}
    else:
        versions = {}
    if not versions:
        deployed = sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() and not base.name.isdigit() \
            else [base.parent.name]
        raise ModelNotFoundException(f"Model {name} is not deployed in this service (its models: "
                                     f"{', '.join(deployed) or 'none'}; AZUREML_MODEL_DIR={model_dir})")
    wanted = str(version) if version is not None else max(versions, key=lambda v: int(v) if v.isdigit() else -1)
    if wanted not in versions:
        raise ModelNotFoundException(f"Model {name} version {version} is not deployed in this service (deployed "
                                     f"versions: {', '.join(sorted(versions))})")
    entries = sorted(os.listdir(versions[wanted]))
    if len(entries) != 1:
        raise WebserviceException(f"Dir {versions[wanted]} can contain only 1 file or folder. Found {entries}")
    return os.path.join(versions[wanted], entries[0])


class InferenceConfig:
    """What a service runs: the scoring script (its init() and run(input_data)), its folder and its environment.

    `environment` is an Environment (built on this machine as a run's is; None: this interpreter). The old
    style, `runtime='python'` with `conda_file`, becomes an environment built from that file. Azure ML's own
    base images carry an OS and conda only, so `base_image` naming one is kept in the record and said once;
    another image, and `extra_docker_file_steps`, would be built in Azure's container registry: refused."""

    def __init__(self, entry_script: Optional[str] = None, runtime: Optional[str] = None,
                 conda_file: Optional[str] = None, extra_docker_file_steps: Optional[str] = None,
                 source_directory: Optional[str] = None, enable_gpu: Optional[bool] = None,
                 description: Optional[str] = None, base_image: Optional[str] = None,
                 base_image_registry: Any = None, cuda_version: Optional[str] = None, environment: Any = None) -> None:
        from azureml.core._bridge import unsupported

        self.entry_script, self.runtime, self.conda_file = entry_script, runtime, conda_file
        self.extra_docker_file_steps, self.source_directory = extra_docker_file_steps, source_directory
        self.enable_gpu, self.description, self.base_image = enable_gpu, description, base_image
        self.base_image_registry, self.cuda_version, self.environment = base_image_registry, cuda_version, environment
        if environment is not None:
            clash = [k for k in ("runtime", "conda_file", "extra_docker_file_steps", "enable_gpu", "base_image",
                                 "cuda_version") if getattr(self, k) is not None]
            if clash:
                raise WebserviceException(f"InferenceConfig: environment= and {', '.join(clash)}= were both given; the "
                                          "environment says what the service runs in: give one or the other")
        if runtime is not None and str(runtime).lower() not in ("python", "spark-py"):
            raise WebserviceException(f"InferenceConfig: runtime '{runtime}' is not one of python, spark-py")
        if runtime is not None and str(runtime).lower() == "spark-py":
            unsupported("InferenceConfig(runtime='spark-py')", "mltrain runs no Spark; use runtime='python' or an "
                                                                "environment")
        if extra_docker_file_steps is not None:
            unsupported("InferenceConfig(extra_docker_file_steps=...)", "Dockerfile steps build an image in Azure's "
                        "container registry; put what they install in the environment's conda or pip packages")
        if base_image is not None and not str(base_image).startswith(AZUREML_IMAGES):
            unsupported("InferenceConfig(base_image=...)", "a custom image is built in Azure's container registry and "
                        "the service runs on this machine: give environment=Environment(...) with the image's packages")
        if conda_file is not None and not os.path.isfile(self._path(conda_file)):
            raise WebserviceException(f"InferenceConfig: conda_file {self._path(conda_file)} does not exist")

    def _path(self, path: str) -> str:
        """A path as Azure reads it: relative to source_directory when one is given."""
        return os.path.join(self.source_directory, path) if self.source_directory and not os.path.isabs(path) else path

    def _unapplied(self) -> Dict[str, Any]:
        """The settings that mean something only in Azure's image build: kept in the record, said once."""
        keys = ("enable_gpu", "cuda_version", "base_image", "base_image_registry")
        return {k: getattr(self, k) for k in keys if getattr(self, k) is not None}

    def __repr__(self) -> str:
        return (f"InferenceConfig(entry_script={self.entry_script}, runtime={self.runtime}, "
                f"conda_file={self.conda_file}, source_directory={self.source_directory}, "
                f"environment={getattr(self.environment, 'name', None)})")
