"""azure-ai-ml's online endpoint and deployment entities as mltrain's endpoint requests (mltrain.endpoints.serving's
EndpointSpec and DeploymentSpec), and mltrain's endpoint records as those entities again.

An entity is read through its public attributes, field by field as the YAML front end (mltrain.azureml.online_files)
reads the same fields of a file:
- a model is an entity `Model(path=...)` registered now in mltrain's registry (one given no name under
  ENDPOINT-DEPLOYMENT, as `az ml` registers an inline model), a registered one (`ml_client.models.get`), or a name:
  `azureml:NAME:VERSION`, `azureml:NAME@latest`, a registered model's id (`.../models/NAME/versions/V`);
- an environment resolves as a v2 job's does: a curated or `.mltrain/environment/` name (a string, or an
  Environment entity that has only a name), a conda file (with Azure's base image or Docker Hub's Python) built into a
  virtual environment on this host; none: mltrain's own interpreter;
- settings that mean something in Azure's cloud only (instance types, probes, scale settings, identity, mirrored
  traffic) are kept on the record as given and said once.
Errors are MltrainError lines; the operations (sdk_v2.online) raise them as azure-ai-ml's exception types.
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from mltrain.azureml import online_files, references
from mltrain.azureml.sdk_v2 import assets
from mltrain.azureml.sdk_v2 import azure_ai_ml_internals as internals
from mltrain.azureml.yaml_lines import JobFile, JobFileError
from mltrain.base.errors import MltrainError
from mltrain.endpoints import serving
from mltrain.endpoints.endpoint_record import DeploymentRecord, EndpointRecord
from mltrain.endpoints.serving import DeploymentSpec, EndpointSpec
from mltrain.environments.spec import EnvironmentSpec

Say = Callable[[str], None]
#: An endpoint's and a deployment's attributes that mean something in Azure's cloud only.
CLOUD_ENDPOINT = ("identity", "public_network_access", "compute", "mirror_traffic")
CLOUD_DEPLOYMENT = ("instance_type", "scale_settings", "liveness_probe", "readiness_probe", "app_insights_enabled",
                    "egress_public_network_access", "data_collector", "resources", "model_mount_path",
                    "private_network_connection", "package_model")
#: a registered model's Azure id: .../models/NAME/versions/VERSION
MODEL_ID = re.compile(r"/models/([A-Za-z0-9_.-]+)/versions/([A-Za-z0-9_.-]+)/?$")
DEFAULT_TIMEOUT_MS = 5000  # Azure's default request_settings.request_timeout_ms


# --------------------------------------------------------------------------------------- entity -> spec
def endpoint_spec(endpoint: Any, say: Say) -> EndpointSpec:
    name = str(endpoint.name or "")
    auth = str(endpoint.auth_mode or "key").lower()
    if auth == "aad_token":
        raise MltrainError(f"endpoint {name}: auth_mode aad_token needs Microsoft Entra ID; use key or aml_token "
                           "(the endpoint checks its key for either)")
    cloud = _cloud(endpoint, CLOUD_ENDPOINT)
    mirror = cloud.pop("mirror_traffic", {})
    _say_cloud(cloud, f"endpoint {name}", say)
    if mirror:
        say(f"note: endpoint {name}: mirror_traffic {mirror}: Azure copies that share of the requests to those "
            "deployments and drops their answers; here nothing is mirrored (kept on the record)")
    cloud["mirror_traffic"] = mirror  # (all zeros: none, as Azure sends it)
    traffic = {str(k): int(v) for k, v in (endpoint.traffic or {}).items()}
    kind = "kubernetes" if _is(endpoint, "KubernetesOnlineEndpoint") else "managed"
    return EndpointSpec(name=name, auth_mode=auth, description=str(endpoint.description or ""),
                        tags={str(k): str(v) for k, v in (endpoint.tags or {}).items()}, kind=kind,
                        cloud_settings=cloud, traffic=traffic or None)  # no traffic given: the split stays


def deployment_spec(deployment: Any, say: Say) -> DeploymentSpec:
    name, endpoint = str(deployment.name or ""), str(deployment.endpoint_name or "")
    if not name or not endpoint:
        raise MltrainError(f"deployment {name or '(no name)'}: a deployment needs name and endpoint_name")
    base = internals.base_path(deployment)
    code_dir, script = _code(deployment.code_configuration, base, name)
    if script is None and str(getattr(deployment.model, "type", "") or "").lower() == "triton_model":
        raise MltrainError(f"deployment {name}: a Triton model without a scoring script is served by NVIDIA's Triton "
                           "server in Azure's image; mltrain serves a scoring script's init()/run() or an MLflow model")
    requests = deployment.request_settings
    cloud = _cloud(deployment, CLOUD_DEPLOYMENT)
    if requests is not None and requests.max_queue_wait_ms is not None:
        cloud["request_settings.max_queue_wait_ms"] = requests.max_queue_wait_ms
    _say_cloud(cloud, f"deployment {name}", say)
    try:
        models = _models(deployment.model, f"{endpoint}-{name}")
    except MltrainError as exc:
        raise MltrainError(f"deployment {name}: model: {exc}") from None
    return DeploymentSpec(
        name=name, endpoint=endpoint, models=models, scoring_script=script,
        code_dir=code_dir, environment=_environment(deployment.environment, base, name, say),
        instance_count=int(deployment.instance_count or 1),
        request_timeout_ms=int(getattr(requests, "request_timeout_ms", None) or DEFAULT_TIMEOUT_MS),
        max_concurrent_requests_per_instance=int(getattr(requests, "max_concurrent_requests_per_instance", None) or 1),
        environment_variables={str(k): str(v) for k, v in (deployment.environment_variables or {}).items()},
        cloud_settings=cloud, description=str(deployment.description or ""),
        tags={str(k): str(v) for k, v in (deployment.tags or {}).items()})


def _is(entity: Any, class_name: str) -> bool:
    return any(cls.__name__ == class_name for cls in type(entity).__mro__)


def _cloud(entity: Any, fields: Tuple[str, ...]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key in fields:
        value = getattr(entity, key, None)
        if key == "mirror_traffic" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if v}  # as Azure sends it: the zero shares stripped
        if value not in (None, False, {}, [], ""):
            out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """A setting as JSON: an entity (a probe, scale settings) as its public attributes."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_") and v is not None}
    return str(value)


def _say_cloud(cloud: Dict[str, Any], what: str, say: Say) -> None:
    if cloud:
        say(f"note: {what}: {', '.join(sorted(cloud))}: Azure's cloud settings, kept on the record (the server runs "
            "on this machine)")


def _code(code: Any, base: str, name: str) -> Tuple[Optional[str], Optional[str]]:
    """(code folder, scoring script) of a CodeConfiguration, or (None, None): an MLflow model served without one."""
    if code is None or not (code.code or code.scoring_script):
        return None, None
    folder = str(code.code) if code.code else None
    if folder and (folder.startswith("azureml:") or "://" in folder or folder.startswith("/subscriptions/")):
        raise MltrainError(f"deployment {name}: code_configuration.code '{folder}' names code registered in Azure; "
                           "give the local folder of the scoring script")
    if not code.scoring_script:
        raise MltrainError(f"deployment {name}: code_configuration names no scoring_script (the file in "
                           f"{folder} with init() and run())")
    return (os.path.normpath(os.path.join(base, folder)) if folder else None), str(code.scoring_script)


def _models(value: Any, anonymous: str) -> List[Any]:
    """The deployment's model as registry versions (mltrain.models.registry.Model)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [_named_model(value)]
    if not internals.is_anonymous(value) and value.version is not None:
        known = _registered(str(value.name), str(value.version))
        if known is not None and os.path.realpath(str(value.path)) == os.path.realpath(str(known.source)):
            return [known]  # the entity ml_client.models returned: that version, not a new one
    return [assets.register_model(value, anonymous if internals.is_anonymous(value) else str(value.name))]


def _named_model(value: str) -> Any:
    from mltrain.models.registry import Model as Registered  # heavy

    if value.startswith("azureml://registries/"):
        raise MltrainError(f"model '{value}' is in an Azure ML registry, Azure's service; register the model here "
                           "(ml_client.models.create_or_update) and name it azureml:NAME:VERSION")
    short, arm = references.SHORT.match(value), MODEL_ID.search(value)
    if short:
        name, label, version = short.groups()
        if label not in (None, "latest"):
            raise MltrainError(f"model '{value}': label '{label}': only @latest is known here")
    elif arm:
        name, version = arm.groups()
    else:
        raise MltrainError(f"model '{value}' is not a model reference; write azureml:NAME:VERSION or azureml:NAME@latest "
                           "(or give a Model entity)")
    if version is not None and not str(version).isdigit():
        raise MltrainError(f"model '{value}': mltrain's model versions are whole numbers")
    return Registered(name, int(version) if version else None)


def _registered(name: str, version: str) -> Any:
    from mltrain.models.registry import Model as Registered  # heavy

    try:
        return Registered(name, int(version))
    except (MltrainError, ValueError):
        return None


def _environment(value: Any, base: str, name: str, say: Say) -> Optional[EnvironmentSpec]:
    if value is None:
        return None
    if isinstance(value, str):
        ref: Any = value if value.startswith(("azureml:", "/")) or "://" in value else f"azureml:{value}"
    else:  # an Environment entity: its image, conda file (the file's data) or build context, else its name
        ref = {key: item for key, item in (("image", value.image), ("conda_file", value.conda_file),
                                           ("build", value.build)) if item is not None}
        if not ref:
            ref = f"azureml:{value.name}" + (f":{value.version}" if value.version else "")
        elif "build" in ref:
            ref["build"] = True  # refused as a job's is: a Docker build context needs a build service
        elif "conda_file" not in ref and not references.PYTHON_IMAGE.match(str(ref["image"])):
            raise MltrainError(f"deployment {name}: environment image {ref['image']}: a deployment's server runs on "
                               "this machine, in no container; give the environment a conda_file (Azure's base image "
                               "may stay), name a curated environment, or give none (mltrain's own interpreter)")
    jf = JobFile(os.path.join(base, f"{name}.deployment"), None)
    try:
        spec = online_files.environment(jf, ("environment",), ref, say)
    except JobFileError as exc:
        raise MltrainError(f"deployment {name}: environment: {exc.problem}") from None
    return spec


# --------------------------------------------------------------------------------------- record -> entity
def endpoint_entity(record: EndpointRecord) -> Any:
    from azure.ai.ml.entities import KubernetesOnlineEndpoint, ManagedOnlineEndpoint  # optional

    cloud = record.cloud_settings
    fields: Dict[str, Any] = {"name": record.name, "description": record.description or None, "tags": dict(record.tags),
                              "auth_mode": record.auth_mode, "traffic": dict(record.traffic), "location": "local",
                              "mirror_traffic": dict(cloud.get("mirror_traffic") or {})}
    cls: Any = ManagedOnlineEndpoint
    if record.kind == "kubernetes":
        cls, fields["compute"] = KubernetesOnlineEndpoint, cloud.get("compute")
    else:
        fields["public_network_access"] = cloud.get("public_network_access")
    return internals.online_endpoint(cls, record.scoring_uri, record.swagger_uri, "Succeeded", **fields)


def deployment_entity(record: DeploymentRecord, endpoint: EndpointRecord) -> Any:
    """The deployment as Azure's get returns it: its state as its server says (serving.deployment_state: a killed
    server reads Failed), its model a registered model's name, its environment one that resolves to the same."""
    from azure.ai.ml.entities import (  # optional
        CodeConfiguration,
        KubernetesOnlineDeployment,
        ManagedOnlineDeployment,
        OnlineRequestSettings,
    )

    state, _ = serving.deployment_state(record)
    cloud = record.cloud_settings
    code = None
    if record.code_dir and record.scoring_script:  # no code folder: an MLflow model served without a script
        code = CodeConfiguration(code=record.code_dir,
                                 scoring_script=os.path.relpath(record.scoring_script, record.code_dir))
    fields: Dict[str, Any] = {
        "name": record.name, "endpoint_name": record.endpoint, "code_configuration": code,
        "model": f"azureml:{record.models[0]['name']}:{record.models[0]['version']}" if record.models else None,
        "environment": environment_entity(record.environment), "instance_count": record.instance_count,
        "environment_variables": dict(record.environment_variables),
        "request_settings": OnlineRequestSettings(
            request_timeout_ms=record.request_timeout_ms,
            max_concurrent_requests_per_instance=record.max_concurrent_requests_per_instance,
            max_queue_wait_ms=cloud.get("request_settings.max_queue_wait_ms"))}
    if endpoint.kind == "kubernetes":
        return internals.online_deployment(KubernetesOnlineDeployment, state, **fields)
    return internals.online_deployment(ManagedOnlineDeployment, state, instance_type=cloud.get("instance_type"), **fields)


def environment_entity(recorded: Dict[str, Any]) -> Any:
    """A recorded environment as an Environment entity that resolves to the same one again: a curated or workspace
    environment by its name, a conda file's by its packages (the same built environment); mltrain's own: None."""
    from azure.ai.ml.entities import Environment  # optional

    if not recorded or recorded.get("name") == "current":
        return None
    spec = EnvironmentSpec(**recorded)
    if assets.environment_file(spec.name) is not None or not spec.conda:
        return Environment(name=spec.name, version=str(spec.version or "1"))
    return Environment(name=spec.name, conda_file={"name": spec.name, **spec.conda}, image=spec.base_image)
