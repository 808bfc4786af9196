"""The v1 services on mltrain's endpoint engine (mltrain.endpoints): the only module of the stand-ins that calls it.

A v1 service NAME is the endpoint NAME (kind aci, aks or local) with one deployment, `default`. mltrain is
imported inside the functions, so `import azureml.core.webservice` stays fast; every mltrain error comes out as
Azure's WebserviceException, in one line.
"""
from __future__ import annotations

import contextlib
import re
from typing import Any, Dict, Iterator, List, Optional, Tuple

from azureml.exceptions import WebserviceException

DEPLOYMENT = "default"
KINDS = ("aci", "aks", "local")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _serving() -> Any:
    from mltrain.endpoints import serving  # deployment

    return serving


def _records() -> Any:
    from mltrain.endpoints import endpoint_record  # deployment

    return endpoint_record


@contextlib.contextmanager
def errors(service: Optional[str] = None) -> Iterator[None]:
    """mltrain's one-line errors as Azure's WebserviceException (no traceback from mltrain's insides), the
    engine's 'deployment default of endpoint NAME' said as 'service NAME'."""
    from mltrain.base.errors import MltrainError  # deployment

    try:
        yield
    except MltrainError as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise WebserviceException(as_service(text, service), inner_exception=exc) from None


def as_service(text: str, service: Optional[str]) -> str:
    """The engine's words for a v1 service's one deployment, said as Azure says them."""
    if service:
        text = text.replace(f"deployment {DEPLOYMENT} of endpoint {service}", f"service {service}")
        text = text.replace(f"deployment {DEPLOYMENT}:", f"service {service}:")
        text = text.replace(f"endpoint {service} ", f"service {service} ")
    return text


def not_found(name: str) -> WebserviceException:
    return WebserviceException(f"WebserviceNotFound: Webservice with name {name} not found in provided workspace")


def names() -> List[str]:
    records = _records()
    return [n for n in records.list_names() if records.load_endpoint(n).kind in KINDS]


def exists(name: str) -> bool:
    return _records().exists(name)


def describe(name: str) -> Dict[str, Any]:
    """The service's endpoint and deployment records, as plain values."""
    from dataclasses import asdict

    records = _records()
    if not records.exists(name):
        raise not_found(name)
    endpoint = records.load_endpoint(name)
    if endpoint.kind not in KINDS:
        raise WebserviceException(f"WebserviceNotFound: {name} is an online endpoint (`mltrain endpoints show {name}`), "
                                  "not a v1 service")
    out = asdict(endpoint)
    out.update(scoring_uri=endpoint.scoring_uri, swagger_uri=endpoint.swagger_uri, deployment=None)
    if DEPLOYMENT in records.deployment_names(name):
        out["deployment"] = asdict(records.load_deployment(name, DEPLOYMENT))
    return out


def state(name: str) -> Tuple[str, Optional[str]]:
    """Azure's states: Healthy, Transitioning, Failed (it never served), Unhealthy (its server is gone)."""
    records = _records()
    if not records.exists(name):
        raise not_found(name)
    if DEPLOYMENT not in records.deployment_names(name):
        return "Failed", "the service has no deployment"
    record = records.load_deployment(name, DEPLOYMENT)
    now, why = _serving().deployment_state(record)
    why = ANSI.sub("", why).rstrip(".") if why else why  # (a scoring script's error may carry terminal colours)
    if now == "Succeeded":
        return "Healthy", None
    if now == "Creating":
        return "Transitioning", None
    return ("Unhealthy" if record.state == "Succeeded" else "Failed"), why


# ------------------------------------------------------------------------------------------------- deploying
def environment_spec(config: Any, service: str) -> Any:
    """The InferenceConfig's environment as mltrain's EnvironmentSpec (None: this interpreter), as a run gets it:
    a curated name is its catalog entry; another environment is `environment=current` with its values over it."""
    from mltrain.environments.spec import from_config  # deployment

    environment = getattr(config, "environment", None) if config is not None else None
    if environment is None and getattr(config, "conda_file", None):
        from azureml.core.environment import Environment

        environment = Environment.from_conda_specification(f"{service}-env", config._path(config.conda_file))
    if environment is None:
        return None
    option, values = environment.to_mltrain()
    if option != "current":
        return from_config({"name": option})
    node: Dict[str, Any] = {"name": "current", "python": {"user_managed": True}}  # conf/environment/current.yaml
    for key, value in values.items():
        node[key] = {**node[key], **value} if isinstance(value, dict) and isinstance(node.get(key), dict) else value
    return from_config(node)


def registered(models: List[Any]) -> List[Any]:
    """mltrain's registry versions of the v1 Model objects given."""
    out = []
    for model in models or []:
        inner = getattr(model, "_m", model)
        if not hasattr(inner, "source"):
            raise WebserviceException(f"models: {model!r} is not a registered Model (Model.register or "
                                      "run.register_model gives one)")
        out.append(inner)
    return out


def deploy(name: str, models: List[Any], inference_config: Any, settings: Dict[str, Any], show_output: bool,
           update: bool = False) -> None:
    """Create the service's endpoint and its deployment (update: the service's settings, then a new server
    beside the old one, which stops once the new one is ready). A new server that fails to start leaves a
    new service in state Failed, with nothing running (an update: the old server serving, and raises); a
    mistake found before any server starts leaves nothing, and raises."""
    serving, records = _serving(), _records()
    log = (lambda line: print(as_service(line, name))) if show_output else (lambda line: None)
    with errors(name):
        environment = inference_config.spec if isinstance(inference_config, _Recorded) else \
            environment_spec(inference_config, name)
        deployment = serving.DeploymentSpec(
            name=DEPLOYMENT, endpoint=name, models=registered(models),
            scoring_script=getattr(inference_config, "entry_script", None),
            code_dir=getattr(inference_config, "source_directory", None), environment=environment,
            instance_count=settings["instance_count"], request_timeout_ms=settings["request_timeout_ms"],
            max_concurrent_requests_per_instance=settings["max_concurrent_requests"],
            environment_variables=dict(environment.environment_variables) if environment is not None else {},
            cloud_settings=settings.get("image_settings") or {})
    if update:
        update_endpoint(name, settings)
        with errors(name):
            serving.deploy(deployment, log=log)
        return
    with errors(name):
        serving.create_or_update_endpoint(serving.EndpointSpec(
            name=name, auth_mode=settings["auth_mode"], port=settings.get("port") or 0, kind=settings["kind"],
            description=settings.get("description") or "", tags=settings.get("tags") or {},
            cloud_settings=settings["cloud_settings"]))
        if settings.get("keys"):
            set_keys(name, settings["keys"])
    try:
        with errors(name):
            serving.deploy(deployment, log=log)
    except WebserviceException:
        if DEPLOYMENT in records.deployment_names(name):
            return  # its server failed: the service stays, Failed, as Azure's does (wait_for_deployment raises)
        with contextlib.suppress(Exception):
            serving.delete_endpoint(name)
        raise


def current_inputs(name: str) -> Tuple[List[Any], Any]:
    """(models, InferenceConfig) the service runs now: what an update() that changes neither redeploys."""
    from mltrain.environments.spec import EnvironmentSpec  # deployment
    from mltrain.models.registry import Model as Registered  # deployment

    records = _records()
    with errors():
        record = records.load_deployment(name, DEPLOYMENT)
        models = [Registered(m["name"], int(m["version"])) for m in record.models]
    spec = None if record.environment in ({}, {"name": "current"}) else EnvironmentSpec(**record.environment)
    return models, _Recorded(record.scoring_script, record.code_dir, spec)


class _Recorded:
    """The InferenceConfig a service was deployed with, read back from its record."""

    def __init__(self, entry_script: Optional[str], source_directory: Optional[str], spec: Any) -> None:
        self.entry_script, self.source_directory, self.spec = entry_script, source_directory, spec
        self.environment = None
        self.conda_file = None


def update_endpoint(name: str, settings: Dict[str, Any]) -> None:
    """The service's own settings (auth, tags, description, what is kept for the cloud): no new server. Tags
    given replace the service's tags, as Azure's update does."""
    serving, records = _serving(), _records()
    with errors():
        record = records.load_endpoint(name)
        serving.create_or_update_endpoint(serving.EndpointSpec(
            name=name, auth_mode=settings["auth_mode"], kind=record.kind, description=settings.get("description") or "",
            cloud_settings=settings["cloud_settings"]))
        if settings.get("tags") is not None:
            with records.locked(name):
                record = records.load_endpoint(name)
                record.tags = {str(k): str(v) for k, v in settings["tags"].items()}
                records.save_endpoint(record)
        if settings.get("keys"):
            set_keys(name, settings["keys"])


def delete(name: str) -> None:
    with errors(name):
        _serving().delete_endpoint(name)


# ------------------------------------------------------------------------------------------ using a service
def invoke(name: str, body: bytes) -> Tuple[int, bytes]:
    with errors(name):
        return _serving().invoke(name, body)  # type: ignore[no-any-return]


def logs(name: str, lines: Optional[int]) -> str:
    with errors(name):
        return str(_serving().logs(name, DEPLOYMENT, lines))


def keys(name: str) -> Dict[str, str]:
    with errors(name):
        return dict(_serving().get_keys(name))


def set_keys(name: str, given: Dict[str, Optional[str]]) -> Dict[str, str]:
    """Replace one key or both (a None keeps that key); the server reads them at its next request."""
    records = _records()
    with errors(), records.locked(name):
        current = records.load_keys(name) or records.make_keys(name)
        current.update({k: v for k, v in given.items() if v})
        return dict(records.save_keys(name, current))


def new_key() -> str:
    import secrets

    return secrets.token_urlsafe(32)
