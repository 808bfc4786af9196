"""`mltrain ui`: MLflow's own UI server (`mlflow server`) on the store mltrain mirrors runs into and keeps
its model registry in (mltrain.tracking.mlflow_store), as Azure ML's studio shows an experiment's runs,
their metrics, logs and outputs, a sweep's trials and the registered models.

The server is a child process in a process group of its own, so Ctrl-C here stops it and every worker it
started. MLflow's UI has no authentication: it listens on 127.0.0.1 unless --host says otherwise. MLflow
is imported by none of this (only the server imports it), so the command starts in a fraction of a second.
"""
from __future__ import annotations

import argparse
import errno
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import List, NoReturn, Optional

from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.base.processes import stop_group, within
from mltrain.cli import pipeline_rest, runs
from mltrain.runs import mlflow_run
from mltrain.tracking import mlflow_store as store

INSTALL = "pip install 'mltrain[ui]'"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: Seconds the server may take to answer its first request (importing MLflow and its SQL store).
START_S = 120.0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, as every other mltrain error
        raise MltrainError(message)


def server_problem() -> Optional[str]:
    """Why MLflow's UI server cannot start here: the `registry` extra brings mlflow-skinny, a client
    without the server's Flask app and the UI's built JavaScript (full `mlflow`, the `ui` extra, has both)."""
    spec = importlib.util.find_spec("mlflow")
    if spec is None or importlib.util.find_spec("flask") is None or not spec.submodule_search_locations:
        return f"MLflow's UI server is not installed (only the light client, or no MLflow): {INSTALL}"
    build = Path(list(spec.submodule_search_locations)[0]) / "server" / "js" / "build" / "index.html"
    if not build.is_file():
        return f"MLflow's UI is not installed (mlflow-skinny has no server): {INSTALL}"
    return None


def _check_port(host: str, port: int) -> None:
    """A taken port is one line here, not the server's traceback after it has started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the server will: a port whose last server has just stopped (connections in TIME_WAIT) is
        # free; one with a listener is still refused (Linux's SO_REUSEADDR).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise MltrainError(f"port {port} on {host} is taken (another `mltrain ui`?); pick another with --port") from None
            raise MltrainError(f"cannot listen on {host}:{port} ({exc.strerror})") from None


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(server: subprocess.Popen) -> None:
    """Stop the server's whole process group (`mlflow server`, uvicorn and its worker) as a terminal's
    Ctrl-C would (SIGINT: uvicorn's graceful shutdown), then SIGTERM, then SIGKILL if it lingers."""
    stop_group(server.pid, ((signal.SIGINT, 5.0), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)),
               within(lambda grace: server.wait(timeout=grace)))
    try:  # a worker that outlived its parent is still in the group
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: List[str]) -> int:
    parser = _Parser(prog="mltrain ui", description="MLflow's UI on mltrain's runs and models")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--root", help="runs root (default $MLTRAIN_HOME/runs)")
    parser.add_argument("--no-sync", action="store_true", help="skip `mltrain runs sync` before starting")
    parser.add_argument("--pipelines-port", type=int, help="port of published v1 pipelines' REST endpoints "
                                                           "(default: --port + 1)")
    parser.add_argument("--pipelines-only", action="store_true",
                        help="serve only published pipelines' REST endpoints (no MLflow UI)")
    args = parser.parse_args(argv)
    rest_port = args.port + 1 if args.pipelines_port is None else args.pipelines_port
    for flag, port in (("--port", args.port), ("--pipelines-port", rest_port)):
        if not 0 < port < 65536:
            raise MltrainError(f"{flag} {port}: a port is 1 to 65535")
    if args.pipelines_only:
        return _pipelines_only(args.host, rest_port)
    problem = server_problem()
    if problem:
        raise MltrainError(problem)
    uri = store.uri()
    if uri.startswith(("http://", "https://")):
        print(f"runs are tracked on the MLflow server {uri}: its UI is there")
        return 0
    _check_port(args.host, args.port)
    if args.host not in LOCAL_HOSTS:
        print(f"mltrain: warning: MLflow's UI has no authentication: anyone who can reach {args.host}:{args.port} "
              "sees and can change every run and model", file=sys.stderr)
    mlflow_run.catch_up()  # the mirrors of killed commands, even with --no-sync
    if not args.no_sync:
        runs.main(["sync"] + (["--root", args.root] if args.root else []))
    home = mltrain_home()
    home.mkdir(parents=True, exist_ok=True)
    log = home / "ui.log"
    # --artifacts-destination: where the server keeps artifacts it is sent itself (an experiment made in the
    # UI); MLflow's default is ./mlartifacts of the current folder. --workers 1: one user's browser.
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--registry-store-uri", uri,
               "--artifacts-destination", str(home.resolve() / "artifacts"), "--host", args.host,
               "--port", str(args.port), "--workers", "1"]
    if args.host not in LOCAL_HOSTS:  # MLflow refuses other Host headers unless told which to allow
        command += ["--allowed-hosts", "*"]
    # Ctrl-C, and `kill`, stop the server too. SIGINT is set explicitly: a command started in the
    # background of a non-interactive shell inherits it ignored, and would then never stop.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    _check_port(args.host, args.port)  # again: `runs sync` took a while, another server may have started
    rest = pipeline_rest.start(args.host, rest_port)
    # MLflow's job runner (scheduled GenAI scoring and trace archival, a consumer process per queue) does
    # nothing for mltrain's runs: switched off, the server is one process and its uvicorn worker.
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with open(log, "ab") as out:
        server = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True, env=env)
    url = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}"
    try:
        deadline = time.monotonic() + START_S
        while not _answers(url):
            if server.poll() is not None:
                last = (log.read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
                raise MltrainError(f"MLflow's server stopped with exit code {server.returncode}: {last} (log: {log})")
            if time.monotonic() > deadline:
                raise MltrainError(f"MLflow's server did not answer within {START_S:.0f}s (log: {log})")
            time.sleep(0.3)
        if server.poll() is not None:  # what answered is another server that took the port meanwhile
            raise MltrainError(f"port {args.port} on {args.host} is taken; pick another with --port")
        # MLflow 3's UI opens on its GenAI views; the switch at its top left says which, and the browser keeps it.
        print(f"MLflow UI on {store.uri()}: {url}  (runs are under \"Model training\" at the top left; "
              f"Ctrl-C stops it; server log {log})", flush=True)
        print(f"published pipelines' REST endpoints: {pipeline_rest.server_url()}", flush=True)
        server.wait()
        raise MltrainError(f"MLflow's server stopped with exit code {server.returncode} (log: {log})")
    except KeyboardInterrupt:
        print("stopping MLflow's UI", flush=True)
        return 0
    finally:
        _stop(server)
        pipeline_rest.stop(rest)


def _pipelines_only(host: str, port: int) -> int:
    """Only the published pipelines' REST endpoints, until Ctrl-C (needs no MLflow server)."""
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    rest = pipeline_rest.start(host, port)
    print(f"published pipelines' REST endpoints: {pipeline_rest.server_url()}  (Ctrl-C stops it)", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        print("stopping the published pipelines' endpoints", flush=True)
    finally:
        pipeline_rest.stop(rest)
    return 0
