"""`Webservice`: a v1 service (ACI, AKS or local), served on this machine by mltrain's endpoint engine.

A service NAME is mltrain's endpoint NAME (`mltrain endpoints show NAME`) with one deployment, `default`: Azure's
inference server running the scoring script in a process of its own, which outlives the notebook that deployed
it. `Webservice(ws, name)` finds it again from any process. Settings that mean something only in Azure's cloud
(CPU cores, memory, SSL, App Insights, autoscale...) are kept in the endpoint's record and named once, in a
note, when given.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Optional, Tuple

from azureml.core._refuse_unknown import RefuseUnknown
from azureml.core.webservice import _engine
from azureml.exceptions import WebserviceException

#: Azure's rule for service names
NAME = re.compile(r"^[a-z]([-a-z0-9]{1,30})[a-z0-9]$")
REGISTRY_INSTEAD = ("it builds a Docker image in Azure's container registry; deploy with Model.deploy(ws, name, "
                    "models, InferenceConfig(entry_script=..., environment=...), deployment_config)")


class WebserviceDeploymentConfiguration:
    """A deploy_configuration(): the settings as given, under Azure's names (None: Azure's default)."""

    _type = ""  # Azure's compute type: ACI, AKS, Local
    _kind = ""  # the endpoint's kind in mltrain's record
    _fields: Tuple[str, ...] = ()
    _defaults: Dict[str, Any] = {}
    #: settings this machine applies; the others are kept in the record
    _applied: Tuple[str, ...] = ("tags", "properties", "description", "auth_enabled", "primary_key", "secondary_key")
    #: settings whose change needs a new server
    _redeploying: Tuple[str, ...] = ()

    def __init__(self, **given: Any) -> None:
        for key in self._fields:
            setattr(self, key, given.get(key))
        self.validate_configuration()

    def _given(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self._fields if getattr(self, k) is not None}

    def _value(self, key: str) -> Any:
        value = getattr(self, key, None)
        return self._defaults.get(key) if value is None else value

    def validate_configuration(self) -> None:
        for key in ("cpu_cores", "memory_gb", "cpu_cores_limit", "memory_gb_limit", "scoring_timeout_ms"):
            value = getattr(self, key, None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise WebserviceException(f"Invalid configuration, {key} must be greater than zero.")
        for key in ("num_replicas", "replica_max_concurrent_requests", "gpu_cores", "port"):
            value = getattr(self, key, None)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < (key == "num_replicas")):
                raise WebserviceException(f"Invalid configuration, {key} must be a whole number"
                                          f"{' of 1 or more' if key == 'num_replicas' else ''}.")
        if getattr(self, "auth_enabled", None) and getattr(self, "token_auth_enabled", None):
            raise WebserviceException("Invalid configuration, auth_enabled and token_auth_enabled cannot both be True.")

    def _auth_mode(self) -> str:
        if self._value("token_auth_enabled"):
            return "aml_token"
        return "key" if self._value("auth_enabled") else "none"

    def _unapplied(self) -> Dict[str, Any]:
        """The settings given that this machine does not apply (the note's list)."""
        return {k: v for k, v in self._given().items() if k not in self._applied}

    def _settings(self) -> Dict[str, Any]:
        """What the engine gets: the endpoint's and the deployment's settings."""
        kept = {k: self._value(k) for k in self._fields
                if k not in self._applied and self._value(k) is not None}
        kept.update(compute_type=self._type, properties=dict(self._value("properties") or {}))
        keys = {"primaryKey": self._value("primary_key"), "secondaryKey": self._value("secondary_key")}
        return {"kind": self._kind, "auth_mode": self._auth_mode(), "port": self._value("port"),
                "description": self._value("description"), "tags": self._value("tags"), "cloud_settings": kept,
                "instance_count": self._value("num_replicas") or 1,
                "request_timeout_ms": int(self._value("scoring_timeout_ms") or 60000),
                "max_concurrent_requests": self._value("replica_max_concurrent_requests") or 1,
                "keys": keys if any(keys.values()) else None}

    @classmethod
    def _from_record(cls, described: Dict[str, Any]) -> Dict[str, Any]:
        """The settings a service has now, as this class's arguments (for update())."""
        cloud = described["cloud_settings"]
        deployment = described["deployment"] or {}
        now: Dict[str, Any] = {k: v for k, v in cloud.items() if k in cls._fields}
        now.update(tags=dict(described["tags"]), description=described["description"] or None,
                   properties=dict(cloud.get("properties") or {}))
        if "auth_enabled" in cls._fields:
            now["auth_enabled"] = described["auth_mode"] == "key"
        if "token_auth_enabled" in cls._fields:
            now["token_auth_enabled"] = described["auth_mode"] == "aml_token"
        if "num_replicas" in cls._fields and deployment:
            now.update(num_replicas=deployment["instance_count"], scoring_timeout_ms=deployment["request_timeout_ms"],
                       replica_max_concurrent_requests=deployment["max_concurrent_requests_per_instance"])
        if "port" in cls._fields:
            now["port"] = described["port"]
        return {k: v for k, v in now.items() if k in cls._fields}

    def print_deploy_configuration(self) -> None:
        print(json.dumps(self._given(), indent=2, default=str))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._given().items())})"


def _note(name: str, settings: Dict[str, Any]) -> None:
    if settings:
        print(f"note: service {name} runs on this machine; kept in its record, not applied here: "
              + ", ".join(f"{k}={v}" for k, v in settings.items()))


def deploy_service(workspace: Any, name: str, models: List[Any], inference_config: Any, deployment_config: Any,
                   deployment_target: Any, overwrite: bool, show_output: bool) -> Webservice:
    """Model.deploy: a new service (or, with overwrite, one in place of the service of that name)."""
    from azureml.core.webservice.aci import AciWebservice

    if not isinstance(name, str) or not NAME.match(name):
        raise WebserviceException("Error, provided service name is invalid. It must only consist of lowercase letters, "
                                  "numbers, or dashes, start with a letter, end with a letter or number, and be between "
                                  f"3 and 32 characters long (given: {name!r}).")
    config = deployment_config if deployment_config is not None else AciWebservice.deploy_configuration()
    if not isinstance(config, WebserviceDeploymentConfiguration):
        raise WebserviceException(f"deployment_config: {config!r} is not a deployment configuration (give "
                                  "AciWebservice.deploy_configuration(...), AksWebservice's or LocalWebservice's)")
    if _engine.exists(name):
        try:
            _engine.describe(name)
        except WebserviceException:
            raise WebserviceException(f"Error, there is already an online endpoint named {name}, not a v1 service "
                                      f"(`mltrain endpoints delete {name}` removes it); give the service another name") \
                from None
        if not overwrite:
            raise WebserviceException(f"Error, there is already a service with name {name} found in workspace "
                                      f"{getattr(workspace, 'name', workspace)} (overwrite=True replaces it)")
        _engine.delete(name)
    notes = config._unapplied()
    image = inference_config._unapplied() if inference_config is not None else {}
    if deployment_target is not None:
        notes["deployment_target"] = getattr(deployment_target, "name", deployment_target)
    _note(name, {**notes, **image})
    _engine.deploy(name, models, inference_config, {**config._settings(), "image_settings": image}, show_output)
    return Webservice(workspace, name)


class Webservice(RefuseUnknown):
    """A deployed service; `Webservice(ws, name)` gives the AciWebservice, AksWebservice or LocalWebservice of
    that name, as Azure's does."""

    _webservice_type = "Webservice"
    _config_class: Any = WebserviceDeploymentConfiguration
    _by_kind: Dict[str, type] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._config_class._kind:
            Webservice._by_kind[cls._config_class._kind] = cls

    def __new__(cls, workspace: Any = None, name: Optional[str] = None) -> Any:
        if name is None:
            raise WebserviceException(f"{cls.__name__}(workspace, name): give the service's name")
        described = _engine.describe(name)
        kind = Webservice._by_kind[described["kind"]]
        if cls is not Webservice and cls is not kind:
            raise WebserviceException(f"WebserviceNotFound: {name} is an {kind._webservice_type} service, not "
                                      f"{cls._webservice_type} (Webservice(ws, '{name}') gives it)")
        service = object.__new__(kind)
        service.__dict__["_described"] = described
        return service

    def __init__(self, workspace: Any = None, name: Optional[str] = None) -> None:
        self.workspace = workspace
        self.name = str(name)
        self._read(self.__dict__.pop("_described", None) or _engine.describe(self.name))

    def _read(self, described: Dict[str, Any]) -> None:
        cloud = described["cloud_settings"]
        deployment = described["deployment"] or {}
        self.compute_type = self._webservice_type
        self.scoring_uri: Optional[str] = described["scoring_uri"]
        self.swagger_uri: Optional[str] = described["swagger_uri"]
        self.tags = dict(described["tags"])
        self.properties = dict(cloud.get("properties") or {})
        self.description = described["description"] or None
        self.created_time = datetime.fromtimestamp(described["created"], tz=timezone.utc)
        self.updated_time = datetime.fromtimestamp(deployment.get("started") or described["created"], tz=timezone.utc)
        self.auth_enabled = described["auth_mode"] == "key"
        self.token_auth_enabled = described["auth_mode"] == "aml_token"
        self.cpu_cores, self.memory_gb = cloud.get("cpu_cores"), cloud.get("memory_gb")
        self.image_id = None  # no image: the service runs in an environment on this machine
        self._models = [f"{m['name']}:{m['version']}" for m in deployment.get("models") or []]
        self._port = described["port"]

    # ------------------------------------------------------------------------------------------- state
    @property
    def state(self) -> str:
        return _engine.state(self.name)[0]

    @property
    def error(self) -> Optional[str]:
        return _engine.state(self.name)[1]

    def wait_for_deployment(self, show_output: bool = False, timeout_sec: Optional[float] = None) -> None:
        """The deployment ended when Model.deploy returned: Healthy, or why not (one line)."""
        state, why = _engine.state(self.name)
        if state != "Healthy":
            raise WebserviceException(f"Service deployment polling reached non-successful terminal state, current "
                                      f"service state: {state}. Error: {why}. More information can be found using "
                                      "'.get_logs()'")
        if show_output:
            print(f'{self.compute_type} service creation operation finished, operation "Succeeded" ({self.scoring_uri})')

    def get_logs(self, num_lines: int = 5000, init: bool = False) -> str:
        return _engine.logs(self.name, num_lines)

    # ---------------------------------------------------------------------------------------------- use
    def run(self, input_data: Any) -> Any:
        """POST input_data to the scoring URI (with the service's key): run()'s answer, parsed from JSON."""
        if isinstance(input_data, (bytes, bytearray)):
            body = bytes(input_data)
        elif isinstance(input_data, str):
            body = input_data.encode()
        else:
            body = json.dumps(input_data).encode()
        status, answer = _engine.invoke(self.name, body)
        text = answer.decode(errors="replace")
        if status != 200:
            content = " ".join(text.split())[:500]
            raise WebserviceException(f"Received bad response from service. More information can be found by calling "
                                      f"`.get_logs()` on the webservice object. Response Code: {status}, Content: "
                                      f"{content}")
        try:
            return json.loads(text)
        except ValueError:
            return text

    def get_keys(self) -> Tuple[str, str]:
        self._needs("key")
        keys = _engine.keys(self.name)
        return keys["primaryKey"], keys["secondaryKey"]

    def regen_key(self, key: str, set_key: Optional[str] = None) -> None:
        if key not in ("Primary", "Secondary"):
            raise WebserviceException('Error, key must be either "Primary" or "Secondary".')
        self._needs("key")
        _engine.set_keys(self.name, {f"{key.lower()}Key": set_key or _engine.new_key()})

    def _needs(self, mode: str) -> None:
        auth = _engine.describe(self.name)["auth_mode"]
        if auth == mode:
            return
        if auth == "none":
            raise WebserviceException(f"Error, auth is not enabled for service {self.name}: it takes requests without "
                                      "a key (update(auth_enabled=True) gives it keys)")
        if auth == "aml_token":
            raise WebserviceException(f"Error, service {self.name} uses token auth: get_token() gives its token")
        raise WebserviceException(f"Error, service {self.name} uses key auth, not token auth: get_keys() gives its keys")

    # ------------------------------------------------------------------------------------------- change
    def update(self, models: Optional[List[Any]] = None, inference_config: Any = None, deployment_config: Any = None,
               image: Any = None, **changes: Any) -> None:
        """New settings, models or scoring code. New models or code (or a new replica count) start a new
        server beside the old one, which stops once the new one is ready: the service keeps answering. A new
        server that fails raises here, and the old one keeps serving."""
        from azureml.core._bridge import unsupported

        if image is not None:
            unsupported(f"{type(self).__name__}.update(image=...)", REGISTRY_INSTEAD)
        config_class = self._config_class
        unknown = sorted(set(changes) - set(config_class._fields))
        if unknown:
            raise WebserviceException(f"{type(self).__name__}.update: {', '.join(unknown)} is not a setting of this "
                                      f"service (settings: models, inference_config, {', '.join(config_class._fields)})")
        if deployment_config is not None and not isinstance(deployment_config, config_class):
            raise WebserviceException(f"{type(self).__name__}.update: deployment_config is a "
                                      f"{type(deployment_config).__name__}; this service takes a "
                                      f"{config_class.__name__}")
        given = {**(deployment_config._given() if deployment_config is not None else {}),
                 **{k: v for k, v in changes.items() if v is not None}}
        if not given and models is None and inference_config is None:
            raise WebserviceException("No parameters provided to update.")
        config = config_class(**{**config_class._from_record(_engine.describe(self.name)), **given})
        _note(self.name, {k: v for k, v in given.items() if k not in config_class._applied})
        settings = {**config._settings(), "image_settings": inference_config._unapplied() if inference_config else {}}
        if models is not None or inference_config is not None or set(given) & set(config_class._redeploying):
            now_models, now_inference = _engine.current_inputs(self.name)
            _engine.deploy(self.name, now_models if models is None else models, inference_config or now_inference,
                           settings, show_output=False, update=True)
        else:
            _engine.update_endpoint(self.name, settings)
        self._read(_engine.describe(self.name))

    def delete(self) -> None:
        _engine.delete(self.name)

    def serialize(self) -> Dict[str, Any]:
        described = _engine.describe(self.name)
        state, why = _engine.state(self.name)
        return {"name": self.name, "description": described["description"] or None, "tags": dict(described["tags"]),
                "properties": dict(described["cloud_settings"].get("properties") or {}), "state": state, "error": why,
                "createdTime": self.created_time.isoformat(), "updatedTime": self.updated_time.isoformat(),
                "computeType": self.compute_type, "workspaceName": getattr(self.workspace, "name", None),
                "scoringUri": described["scoring_uri"], "swaggerUri": described["swagger_uri"],
                "authEnabled": described["auth_mode"] == "key", "tokenAuthEnabled": described["auth_mode"] == "aml_token",
                "containerResourceRequirements": {"cpu": described["cloud_settings"].get("cpu_cores"),
                                                  "memoryInGB": described["cloud_settings"].get("memory_gb")},
                "models": list(self._models), "cloudSettings": dict(described["cloud_settings"])}

    # ------------------------------------------------------------------------------------------- finding
    @staticmethod
    def list(workspace: Any, compute_type: Optional[str] = None, image_name: Optional[str] = None,
             image_id: Optional[str] = None, model_name: Optional[str] = None, model_id: Optional[str] = None,
             tags: Any = None, properties: Any = None, image_digest: Optional[str] = None) -> List[Webservice]:
        services = [Webservice(workspace, name) for name in _engine.names()]
        if compute_type:
            services = [s for s in services if s.compute_type.lower() == compute_type.lower()]
        if model_name:
            services = [s for s in services if any(m.split(":")[0] == model_name for m in s._models)]
        if model_id:
            services = [s for s in services if model_id in s._models]
        for attribute, wanted in (("tags", tags), ("properties", properties)):
            for item in wanted or []:
                key, value = (item, None) if isinstance(item, str) else (item[0], item[1])
                services = [s for s in services if key in getattr(s, attribute)
                            and (value is None or getattr(s, attribute)[key] == value)]
        return services

    @staticmethod
    def deploy(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Webservice.deploy", REGISTRY_INSTEAD)

    @staticmethod
    def deploy_from_model(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Webservice.deploy_from_model", REGISTRY_INSTEAD)

    @staticmethod
    def deploy_from_image(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("Webservice.deploy_from_image", REGISTRY_INSTEAD)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(workspace={getattr(self.workspace, 'name', None)!r}, name={self.name}, "
                f"scoring_uri={self.scoring_uri})")


def token_for(service: Webservice) -> Tuple[str, datetime]:
    """AKS token auth: the service's key is its token here (it does not expire; refresh_by is a day away)."""
    service._needs("aml_token")
    return _engine.keys(service.name)["primaryKey"], datetime.now(timezone.utc) + timedelta(days=1)

