"""Azure's online endpoint and deployment YAML (`az ml online-endpoint create -f`, `online-deployment create -f`)
read into mltrain's endpoint requests (mltrain.endpoints.serving's EndpointSpec and DeploymentSpec).

Fields Azure's cloud alone gives a meaning to (instance types, probes, scale settings, identity, network access)
are kept on the record as given and said once; a field Azure does not know is one line naming the nearest.
A model is `azureml:NAME:VERSION` / `azureml:NAME@latest` from mltrain's registry, or an inline `path`, which is
registered (as `az ml` registers an anonymous model); an environment resolves as a v2 job's does.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import yaml

from mltrain.azureml import references
from mltrain.azureml.v2_schema import check_fields, number, one_of, require_mapping
from mltrain.azureml.yaml_lines import JobFile, load
from mltrain.config.paths import builtin_conf_dir
from mltrain.endpoints.serving import DeploymentSpec, EndpointSpec
from mltrain.environments.spec import EnvironmentSpec, from_config

ENDPOINT_FIELDS = ("$schema", "name", "auth_mode", "description", "tags", "traffic", "mirror_traffic", "identity",
                   "public_network_access", "compute", "kind", "location", "properties")
DEPLOYMENT_FIELDS = ("$schema", "name", "endpoint_name", "model", "code_configuration", "environment", "instance_type",
                     "instance_count", "request_settings", "liveness_probe", "readiness_probe", "environment_variables",
                     "app_insights_enabled", "scale_settings", "egress_public_network_access", "data_collector",
                     "description", "tags", "properties", "type", "resources", "model_mount_path")
CLOUD_ENDPOINT = ("identity", "public_network_access", "compute", "kind", "location", "mirror_traffic")
CLOUD_DEPLOYMENT = ("instance_type", "liveness_probe", "readiness_probe", "app_insights_enabled", "scale_settings",
                    "egress_public_network_access", "data_collector", "resources", "model_mount_path")
MODEL_FIELDS = ("$schema", "name", "version", "path", "type", "description", "tags", "properties", "stage")
Log = Callable[[str], None]


def endpoint_from_file(path: str, overrides: Optional[Dict[str, Any]] = None,
                       log: Log = print) -> Tuple[EndpointSpec, Optional[Dict[str, int]]]:
    jf = load(path)
    data = check_fields(jf, (), _with(jf.data, overrides), ENDPOINT_FIELDS)
    name = data.get("name")
    if not name:
        raise jf.error(("name",), "an endpoint needs a name")
    auth = data.get("auth_mode", "key")
    if isinstance(auth, str):  # Azure's loader takes its camel case too (kubernetes-endpoint.yml's `Key`, `AMLToken`)
        auth = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", auth).lower()
    auth = one_of(jf, ("auth_mode",), auth, ("key", "aml_token", "aad_token"))
    if auth == "aad_token":
        raise jf.error(("auth_mode",), "aad_token needs Microsoft Entra ID; use key (mltrain checks it) or aml_token")
    cloud = {k: data[k] for k in CLOUD_ENDPOINT if k in data}
    _say_cloud(cloud, f"endpoint {name}", log)
    traffic = data.get("traffic")
    if traffic is not None:
        traffic = {str(k): int(number(jf, ("traffic", k), v, integer=True, low=0)) for k, v in
                   require_mapping(jf, ("traffic",), traffic).items()}
    kind = "kubernetes" if "kubernetesOnlineEndpoint" in str(data.get("$schema", "")) or data.get("compute") else "managed"
    spec = EndpointSpec(name=str(name), auth_mode=auth, description=str(data.get("description") or ""),
                        tags={str(k): str(v) for k, v in (data.get("tags") or {}).items()}, kind=kind,
                        cloud_settings=cloud)
    return spec, traffic


def deployment_from_file(path: str, overrides: Optional[Dict[str, Any]] = None, log: Log = print) -> DeploymentSpec:
    jf = load(path)
    data = check_fields(jf, (), _with(jf.data, overrides), DEPLOYMENT_FIELDS)
    for key in ("name", "endpoint_name"):
        if not data.get(key):
            raise jf.error((key,), f"a deployment needs {key}")
    name, endpoint = str(data["name"]), str(data["endpoint_name"])
    code = check_fields(jf, ("code_configuration",), data.get("code_configuration"), ("code", "scoring_script"))
    code_dir = str(Path(jf.folder) / str(code["code"])) if code.get("code") else None
    if code and not code.get("scoring_script"):
        raise jf.error(("code_configuration", "scoring_script"), "name the scoring script in the code folder")
    model = data.get("model")
    if not code and isinstance(model, dict) and str(model.get("type") or "").lower() == "triton_model":
        raise jf.error(("model", "type"), "a Triton model without a scoring script is served by NVIDIA's Triton server "
                                          "in Azure's image; mltrain serves a scoring script's init()/run() or an "
                                          "MLflow model")
    requests = check_fields(jf, ("request_settings",), data.get("request_settings"),
                            ("request_timeout_ms", "max_concurrent_requests_per_instance", "max_queue_wait_ms"))
    cloud = {k: data[k] for k in CLOUD_DEPLOYMENT if k in data}
    if "max_queue_wait_ms" in requests:
        cloud["request_settings.max_queue_wait_ms"] = requests["max_queue_wait_ms"]
    _say_cloud(cloud, f"deployment {name}", log)
    env = environment(jf, ("environment",), data.get("environment"), log)  # before the model: a refusal registers nothing
    return DeploymentSpec(
        name=name, endpoint=endpoint, models=models(jf, ("model",), data.get("model"), f"{endpoint}-{name}"),
        scoring_script=str(code["scoring_script"]) if code.get("scoring_script") else None, code_dir=code_dir,
        environment=env,
        instance_count=int(number(jf, ("instance_count",), data.get("instance_count", 1), integer=True, low=1)),
        request_timeout_ms=int(number(jf, ("request_settings", "request_timeout_ms"),
                                      requests.get("request_timeout_ms", 5000), integer=True, low=1)),
        max_concurrent_requests_per_instance=int(requests.get("max_concurrent_requests_per_instance", 1)),
        environment_variables={str(k): str(v) for k, v in (data.get("environment_variables") or {}).items()},
        cloud_settings=cloud, description=str(data.get("description") or ""),
        tags={str(k): str(v) for k, v in (data.get("tags") or {}).items()})


def models(jf: JobFile, path: Tuple[Any, ...], value: Any, anonymous: str) -> List[Any]:
    """The deployment's model as registry versions: a reference, or an inline path registered now."""
    from mltrain.models.registry import Model  # heavy

    if value is None:
        return []
    if isinstance(value, str):
        short = references.SHORT.match(value)
        if not short:
            raise jf.error(path, f"{value!r} is not a model reference; write azureml:NAME:VERSION or azureml:NAME@latest")
        name, label, version = short.groups()
        if label not in (None, "latest"):
            raise jf.error(path, f"label '{label}': only @latest is known here")
        return [Model(name, int(version) if version else None)]
    spec = check_fields(jf, path, value, MODEL_FIELDS)
    if not spec.get("path"):
        raise jf.error(path, "an inline model needs path (a file or folder, relative to this file)")
    local = Path(jf.folder) / str(spec["path"])
    if not local.exists():
        raise jf.error(path + ("path",), f"{local} does not exist")
    return [Model.register(str(spec.get("name") or anonymous), local, description=spec.get("description"),
                           tags={str(k): str(v) for k, v in (spec.get("tags") or {}).items()})]


def environment(jf: JobFile, path: Tuple[Any, ...], value: Any, log: Log) -> Optional[EnvironmentSpec]:
    """A v2 environment (a curated or mapped name, an inline conda_file) as the spec a run's would be."""
    if isinstance(value, dict) and value.get("image") is not None and not value.get("build"):
        image = str(value["image"])
        base = image.startswith(references.AZUREML_BASE_IMAGES) and value.get("conda_file") is not None
        if not (base or references.PYTHON_IMAGE.match(image)):  # a job's refusal would offer Slurm, not here
            routes = " (its inference_config routes requests to its own server)" if "inference_config" in value else ""
            raise jf.error(path + ("image",), f"image {image} is a container{routes}: a deployment here runs "
                                              "on this machine under Azure's inference server, without a container "
                                              "runtime; give a conda_file (with one of Azure ML's base images) or a "
                                              "curated environment")
    env = references.environment(jf, path, value, on_cluster=False)
    for note in env.notes:
        log(f"note: {note}")
    if env.option == "current" and not env.values:
        return None
    node: Dict[str, Any] = {} if env.option == "current" else _option(jf, env.option)
    node.update(env.values)
    return from_config(node)


def _option(jf: JobFile, option: str) -> Dict[str, Any]:
    for base in [*references.config_dirs(jf), builtin_conf_dir()]:
        for suffix in (".yaml", ".yml"):
            file = base / "environment" / f"{option}{suffix}"
            if file.is_file():
                data = yaml.safe_load(file.read_text()) or {}
                data.pop("defaults", None)
                data.setdefault("name", option)
                return dict(data)
    return {"name": option}


def _with(data: Any, overrides: Optional[Dict[str, Any]]) -> Any:
    if not overrides or not isinstance(data, dict):
        return data
    return {**data, **overrides}


def _say_cloud(cloud: Dict[str, Any], what: str, log: Log) -> None:
    if cloud:
        log(f"note: {what}: {', '.join(sorted(cloud))} mean something in Azure's cloud only: kept on the record, "
            "and the server runs on this machine")


__all__: Sequence[str] = ("endpoint_from_file", "deployment_from_file", "models", "environment")
