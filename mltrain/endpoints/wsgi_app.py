"""The WSGI app a deployment's server runs: Azure's app, behind the endpoint's key and traffic rule.

Loaded by gunicorn in each worker of a deployment's server (serve.py), with Azure's app inside (importing it
runs the scoring script's init()). The deployments of an endpoint listen on its port with sockets in
proportion to their shares (balance.py), so the kernel's choice of deployment is the traffic rule's. A request
that arrives there is checked against the endpoint's keys and answered by this deployment's own app (no hop),
unless it names another deployment (header azureml-model-deployment): it is passed on to that one's private
port. The rule and the keys are read from the endpoint's record when it changes (one stat per request), so a
traffic change needs no restart.
"""
from __future__ import annotations

import hmac
import http.client
import json
import os
import random
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from mltrain.endpoints import inference_server
from mltrain.endpoints.endpoint_record import ENDPOINT_FILE, KEYS_FILE

StartResponse = Callable[..., Any]
#: a request may name its deployment, as Azure's endpoints allow (v2 SDK's invoke(deployment_name=...))
DEPLOYMENT_HEADER = "HTTP_AZUREML_MODEL_DEPLOYMENT"
OPEN_PATHS = {("GET", "/"), ("GET", "/swagger.json")}  # liveness and the API description, as Azure leaves open
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-authorization",
              "proxy-authenticate"}


class Routes:
    """The endpoint's record as this server reads it: reloaded whenever the files change."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._files = (str(folder / ENDPOINT_FILE), str(folder / KEYS_FILE))  # joined once: stat'ed per request
        self._seen: Tuple[int, int] = (-1, -1)
        self.auth = True
        self.keys: List[bytes] = []
        self.traffic: Dict[str, int] = {}
        self.ports: Dict[str, int] = {}
        self._names: List[str] = []
        self._weights: List[int] = []

    def fresh(self) -> Routes:
        stamp = (_mtime(self._files[0]), _mtime(self._files[1]))
        if stamp != self._seen:
            data = json.loads((self.folder / ENDPOINT_FILE).read_text())
            self.auth = data.get("auth_mode", "key") != "none"
            self.traffic = {k: int(v) for k, v in (data.get("traffic") or {}).items()}
            self.ports = {k: int(v) for k, v in (data.get("routes") or {}).items()}
            self._names = [n for n, w in self.traffic.items() if w > 0 and n in self.ports]
            self._weights = [self.traffic[n] for n in self._names]
            try:
                keys = json.loads((self.folder / KEYS_FILE).read_text())
            except FileNotFoundError:
                keys = {}
            self.keys = [str(v).encode() for v in keys.values() if v]
            self._seen = stamp
        return self

    def allowed(self, authorization: str) -> bool:
        scheme, _, token = authorization.partition(" ")
        given = (token if scheme.lower() == "bearer" else authorization).strip().encode()
        return bool(given) and any(hmac.compare_digest(given, key) for key in self.keys)

    def pick(self) -> Optional[str]:
        if len(self._names) < 2:  # one deployment takes it all (the usual case): no draw
            return self._names[0] if self._names else None
        return random.choices(self._names, weights=self._weights)[0]


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return 0


def _reply(start_response: StartResponse, status: str, message: str) -> List[bytes]:
    body = json.dumps({"message": message}).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


class EndpointApp:
    def __init__(self, inner: Callable[[Dict[str, Any], StartResponse], Iterable[bytes]], routes: Routes,
                 deployment: str, private_port: int) -> None:
        self.inner, self.routes, self.deployment, self.private_port = inner, routes, deployment, private_port

    def __call__(self, environ: Dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        routes = self.routes.fresh()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        if routes.auth and (method, path) not in OPEN_PATHS and not routes.allowed(environ.get("HTTP_AUTHORIZATION", "")):
            return _reply(start_response, "401 Unauthorized",
                          "this endpoint needs a key: send 'Authorization: Bearer <key>' (mltrain endpoints keys NAME)")
        sock = environ.get("gunicorn.socket")
        if sock is None or sock.getsockname()[1] == self.private_port or (method, path) in OPEN_PATHS:
            return self.inner(environ, start_response)
        # The kernel handed this connection to this deployment in proportion to its share (balance.py): it is
        # the rule's pick. Only a deployment the rule gives nothing (a share just set to 0, its sockets not yet
        # closed) draws by the rule.
        named = environ.get(DEPLOYMENT_HEADER)
        target = named or (self.deployment if routes.traffic.get(self.deployment, 0) > 0 else routes.pick())
        if target is None:
            return _reply(start_response, "424 Failed Dependency",
                          "no deployment takes this endpoint's traffic: give one a share of it, or name one in the "
                          "'azureml-model-deployment' header")
        if target == self.deployment:
            return self.inner(environ, start_response)
        port = routes.ports.get(target)
        if port is None:
            return _reply(start_response, "404 Not Found", f"this endpoint has no deployment named '{target}' "
                          f"(its deployments: {', '.join(sorted(routes.ports))})")
        return _pass_on(environ, start_response, port)


def _pass_on(environ: Dict[str, Any], start_response: StartResponse, port: int) -> List[bytes]:
    """The request, sent on to another deployment's private port; its answer, back as it came."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    headers = {key[5:].replace("_", "-").title(): value for key, value in environ.items()
               if key.startswith("HTTP_") and key[5:].replace("_", "-").lower() not in HOP_BY_HOP}
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = environ["CONTENT_TYPE"]
    path = environ.get("PATH_INFO", "/") + (f"?{environ['QUERY_STRING']}" if environ.get("QUERY_STRING") else "")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=inference_server.WORKER_TIMEOUT_S)
    try:
        connection.request(environ.get("REQUEST_METHOD", "POST"), path, body=body, headers=headers)
        answer = connection.getresponse()
        data = answer.read()
    except OSError as exc:
        return _reply(start_response, "502 Bad Gateway", f"the deployment this request was routed to did not answer: {exc}")
    finally:
        connection.close()
    start_response(f"{answer.status} {answer.reason}",
                   [(k, v) for k, v in answer.getheaders() if k.lower() not in HOP_BY_HOP])
    return [data]


def make_app() -> EndpointApp:
    folder = Path(os.environ["MLTRAIN_ENDPOINT_DIR"])
    return EndpointApp(inference_server.azure_app(), Routes(folder), os.environ["MLTRAIN_DEPLOYMENT"],
                       int(os.environ["MLTRAIN_PRIVATE_PORT"]))
