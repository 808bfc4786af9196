"""`Model`: Azure's model registry on mltrain's (MLflow's registry under mltrain's home: `mltrain models ...`
shows the same versions). Deployment has no local service here and is refused in one line."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.exceptions import ModelNotFoundException, UserErrorException

DEPLOY_INSTEAD = ("mltrain trains and registers models; serve one with your own server (model.download() gives "
                  "its files; `mltrain job=score_image_model` scores images in a run)")


def _registry() -> Any:
    from mltrain.models.registry import Model as Registered  # submission

    return Registered


def _errors() -> Any:
    from mltrain.errors import MltrainError  # submission

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
        return str(_registry()(model_name, version).source)

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
    def deploy(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Model.deploy", DEPLOY_INSTEAD)

    @staticmethod
    def package(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Model.package", DEPLOY_INSTEAD)

    @staticmethod
    def profile(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Model.profile", DEPLOY_INSTEAD)

    def __repr__(self) -> str:
        return f"Model(workspace={getattr(self.workspace, 'name', None)!r}, name={self.name}, id={self.id}, " \
               f"version={self.version}, tags={self.tags}, properties={self.properties})"


class InferenceConfig:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from azureml.core._bridge import unsupported

        unsupported("InferenceConfig", DEPLOY_INSTEAD)
