"""Endpoint and deployment records: what an endpoint is, where its server processes are, its keys.

$MLTRAIN_HOME/endpoints/<endpoint>/
    endpoint.json              the endpoint: auth mode, address, traffic, and each deployment's private port
                               (the routing table the servers read; rewritten whole, atomically)
    keys.json                  the two keys (mode 0600: readable only by the user)
    deployments/<name>/deployment.json, server.log, azureml-models/...
Changes to one endpoint are made under a lock on its folder, so two callers never lose each other's change.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home

ENDPOINT_FILE, KEYS_FILE, DEPLOYMENT_FILE, LOG_FILE = "endpoint.json", "keys.json", "deployment.json", "server.log"
#: Azure's rule for endpoint names (3-32 characters, a letter first, letters, digits and '-'), and deployments'
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9-]{1,30}[A-Za-z0-9]$")
DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,30}[A-Za-z0-9]?$")
AUTH_MODES = ("key", "aml_token", "none")


class EndpointError(MltrainError):
    """An endpoint request that cannot be carried out: the message says what, and what is allowed."""


@dataclass
class EndpointRecord:
    name: str
    auth_mode: str = "key"
    host: str = "127.0.0.1"
    port: int = 0
    traffic: Dict[str, int] = field(default_factory=dict)
    #: deployment name -> its private port: where a request routed to it is passed on
    routes: Dict[str, int] = field(default_factory=dict)
    description: str = ""
    tags: Dict[str, str] = field(default_factory=dict)
    kind: str = "managed"  # managed | kubernetes | local | aci | aks: what the front end asked for
    #: settings that mean something only in Azure's cloud, kept as given and said once
    cloud_settings: Dict[str, Any] = field(default_factory=dict)
    created: float = 0.0

    @property
    def scoring_uri(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}/score"

    @property
    def swagger_uri(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}/swagger.json"


@dataclass
class DeploymentRecord:
    name: str
    endpoint: str
    scoring_script: Optional[str]  # absolute path (an MLflow model without one: mltrain's mlflow_score.py)
    code_dir: Optional[str]
    models: List[Dict[str, Any]] = field(default_factory=list)  # [{name, version, source, file}]
    model_dir: str = ""  # AZUREML_MODEL_DIR
    environment: Dict[str, Any] = field(default_factory=dict)  # the EnvironmentSpec, as JSON
    interpreter: str = ""
    instance_count: int = 1  # the server's worker processes
    request_timeout_ms: int = 5000
    max_concurrent_requests_per_instance: int = 1
    environment_variables: Dict[str, str] = field(default_factory=dict)
    port: int = 0  # private
    pid: Optional[int] = None
    state: str = "Creating"  # Creating | Succeeded | Failed
    error: Optional[str] = None
    started: float = 0.0
    ready_s: Optional[float] = None
    cloud_settings: Dict[str, Any] = field(default_factory=dict)
    description: str = ""
    tags: Dict[str, str] = field(default_factory=dict)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def endpoints_root() -> Path:
    return mltrain_home() / "endpoints"


def endpoint_dir(name: str) -> Path:
    return endpoints_root() / name


def deployment_dir(endpoint: str, name: str) -> Path:
    return endpoint_dir(endpoint) / "deployments" / name


def check_name(name: str, what: str = "endpoint") -> None:
    pattern = NAME if what == "endpoint" else DEPLOYMENT_NAME
    if not isinstance(name, str) or not pattern.match(name):
        allowed = ("3 to 32 characters: a letter first, then letters, digits or '-', not ending in '-'"
                   if what == "endpoint" else "1 to 32 letters, digits or '-', not starting or ending with '-'")
        raise EndpointError(f"{what} name {name!r} is not allowed: {allowed}")


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    folder = endpoint_dir(name)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def exists(name: str) -> bool:
    return (endpoint_dir(name) / ENDPOINT_FILE).is_file()


def load_endpoint(name: str) -> EndpointRecord:
    path = endpoint_dir(name) / ENDPOINT_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        known = ", ".join(list_names()) or "none yet"
        raise EndpointError(f"no endpoint named '{name}' (endpoints: {known})") from None
    return EndpointRecord(**data)


def save_endpoint(record: EndpointRecord) -> None:
    folder = endpoint_dir(record.name)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / ENDPOINT_FILE, json.dumps(asdict(record), indent=2, sort_keys=True))


def list_names() -> List[str]:
    root = endpoints_root()
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / ENDPOINT_FILE).is_file())


def load_deployment(endpoint: str, name: str) -> DeploymentRecord:
    path = deployment_dir(endpoint, name) / DEPLOYMENT_FILE
    try:
        return DeploymentRecord(**json.loads(path.read_text()))
    except FileNotFoundError:
        known = ", ".join(deployment_names(endpoint)) or "none"
        raise EndpointError(f"endpoint '{endpoint}' has no deployment named '{name}' (its deployments: {known})") \
            from None


def save_deployment(record: DeploymentRecord) -> None:
    folder = deployment_dir(record.endpoint, record.name)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / DEPLOYMENT_FILE, json.dumps(asdict(record), indent=2, sort_keys=True))


def deployment_names(endpoint: str) -> List[str]:
    root = endpoint_dir(endpoint) / "deployments"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / DEPLOYMENT_FILE).is_file())


def make_keys(name: str) -> Dict[str, str]:
    """Two fresh keys (Azure's primary and secondary), written readable by the user alone."""
    return save_keys(name, {"primaryKey": secrets.token_urlsafe(32), "secondaryKey": secrets.token_urlsafe(32)})


def save_keys(name: str, keys: Dict[str, str]) -> Dict[str, str]:
    """The endpoint's keys as given (v1's primary_key=, regen_key of one of them), readable by the user alone:
    written under a temporary name with mode 0600, then renamed into place (a server reads whole files only)."""
    path = endpoint_dir(name) / KEYS_FILE
    tmp = path.with_name(f".{KEYS_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(keys))
    os.replace(tmp, path)
    return keys


def load_keys(name: str) -> Dict[str, str]:
    try:
        return dict(json.loads((endpoint_dir(name) / KEYS_FILE).read_text()))
    except FileNotFoundError:
        return {}
