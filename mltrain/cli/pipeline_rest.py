"""The REST endpoints of published v1 pipelines, served by `mltrain ui` beside MLflow's UI.

Azure's notebooks start a published pipeline with `requests.post(published_pipeline.endpoint,
json={"ExperimentName": ..., "ParameterAssignments": {...}})` and read `response.json()["Id"]`. Here the
endpoint is a URL of this small server (stdlib http.server, 127.0.0.1 unless told otherwise), on the port
after MLflow's; a POST starts the pipeline and answers {"Id": run_id}. The paths are Azure's:

- `/pipelines/v1.0/PipelineRuns/PipelineSubmit/<published pipeline id>`
- `/pipelines/v1.0/PipelineRunSubmit/Id/<endpoint id>[/<version>]`
- `/pipelines/v1.0/PipelineRunSubmit/Name?name=<endpoint name>[&pipelineVersion=<version>]`

While it runs, `$MLTRAIN_HOME/pipelines_rest.json` says where it listens: `.endpoint` reads it. No
authentication, as MLflow's UI: Azure's bearer header is accepted and ignored.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Optional, Tuple
from urllib.parse import parse_qs, urlsplit

import mltrain
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home

PIPELINE_PREFIX = "/pipelines/v1.0/PipelineRuns/PipelineSubmit/"
ENDPOINT_PREFIX = "/pipelines/v1.0/PipelineRunSubmit/"
#: Seconds one submit may take (its driver starting); a pipeline then runs on without the server.
SUBMIT_S = 300.0


def state_file() -> Path:
    return mltrain_home() / "pipelines_rest.json"


def server_url() -> Optional[str]:
    """The running server's base URL, or None: no state file, or its process has gone (killed with -9)."""
    try:
        state = json.loads(state_file().read_text(encoding="utf-8"))
        os.kill(int(state["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(state["url"])


def target(raw_path: str) -> Optional[Dict[str, Any]]:
    """What a POST path names: a published pipeline, or an endpoint by id or name (with a version)."""
    url = urlsplit(raw_path)
    path = url.path.rstrip("/")
    if path.startswith(PIPELINE_PREFIX) and "/" not in path[len(PIPELINE_PREFIX):]:
        return {"kind": "pipeline", "id": path[len(PIPELINE_PREFIX):]}
    rest = path[len(ENDPOINT_PREFIX):] if path.startswith(ENDPOINT_PREFIX) else None
    if rest is not None and rest.startswith("Id/"):
        parts = rest[3:].split("/")
        if len(parts) in (1, 2) and parts[0]:
            return {"kind": "endpoint", "id": parts[0], "version": parts[1] if len(parts) == 2 else None}
    if rest == "Name":
        query = parse_qs(url.query)
        if query.get("name"):
            versions = query.get("pipelineVersion") or []
            return {"kind": "endpoint", "name": query["name"][0], "version": versions[0] if versions else None}
    return None


def submit(call: Dict[str, Any]) -> Tuple[int, Dict[str, Any]]:
    """Run the submit in a process of its own (azureml.pipeline.core._rest_submit says why); (status, JSON)."""
    shim = str(Path(mltrain.__file__).parent / "_azureml_shim")  # first: the stand-ins answer, not a real SDK
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([shim, *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        done = subprocess.run([sys.executable, "-m", "azureml.pipeline.core._rest_submit"], input=json.dumps(call),
                              capture_output=True, text=True, env=env, timeout=SUBMIT_S)
    except subprocess.TimeoutExpired:
        return 504, {"error": {"code": "Timeout", "message": f"the pipeline did not start within {SUBMIT_S:.0f}s"}}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    try:
        answer = dict(json.loads(lines[-1]))
    except (IndexError, ValueError):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return 500, {"error": {"code": "InternalError", "message": last}}
    if "Id" in answer:
        return 200, answer
    return 400, {"error": {"code": "UserError", "message": str(answer.get("error"))}}


class _Handler(BaseHTTPRequestHandler):
    server_version = "mltrain-pipelines"

    def _answer(self, status: int, body: Dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        call = target(self.path)
        if call is None:
            self._answer(404, {"error": {"code": "NotFound", "message": f"no published pipeline at {self.path}"}})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            call["body"] = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._answer(400, {"error": {"code": "UserError", "message": "the request body is not JSON"}})
            return
        self._answer(*submit(call))

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(405, {"error": {"code": "MethodNotAllowed", "message": "POST starts a published pipeline"}})

    def log_message(self, format: str, *args: Any) -> None:
        with open(mltrain_home() / "pipelines_rest.log", "a", encoding="utf-8") as log:
            log.write(f"{self.log_date_time_string()} {format % args}\n")


def start(host: str, port: int) -> ThreadingHTTPServer:
    """Listen (in a thread of this process) and say where in the state file."""
    try:
        server = ThreadingHTTPServer((host, port), _Handler)
    except OSError as exc:
        raise MltrainError(f"cannot serve published pipelines on {host}:{port} ({exc.strerror}): pick another "
                           "port with --pipelines-port") from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="pipelines-rest", daemon=True).start()
    shown = f"[{host}]" if ":" in host else host
    mltrain_home().mkdir(parents=True, exist_ok=True)
    atomic_write(state_file(), json.dumps({"url": f"http://{shown}:{server.server_address[1]}", "pid": os.getpid()}))
    return server


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()
    try:
        if json.loads(state_file().read_text(encoding="utf-8")).get("pid") == os.getpid():
            state_file().unlink()
    except (OSError, ValueError):
        pass
