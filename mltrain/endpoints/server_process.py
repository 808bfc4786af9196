"""A deployment's server process seen from the command that deploys it (serving.py): started in a session of its
own, waited for until it answers, told apart from another program that took its pid, and stopped, its whole
process group (gunicorn's master and workers)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Optional

from mltrain.base.processes import pid_alive, stop_group, within
from mltrain.endpoints import endpoint_record as records
from mltrain.endpoints import inference_server
from mltrain.endpoints.endpoint_record import LOG_FILE, DeploymentRecord, EndpointRecord

SERVE_MODULE = "mltrain.endpoints.serve"
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


class Stopped(Exception):
    """The deploying command was asked to stop (its `stop` event set: Ctrl-C or SIGTERM) before the server was
    ready."""


def start(record: DeploymentRecord, endpoint: EndpointRecord, folder: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (record.environment.get("environment_variables") or {}).items()})
    env.update(record.environment_variables)  # the deployment's own win over its environment's
    shim = str(_PACKAGE_DIR / "_azureml_shim")
    path = [str(inference_server.layer_dir()), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep)), shim]
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["PYTHONUNBUFFERED"] = "1"
    cwd = record.code_dir or str(folder)  # Azure runs the scoring script from its folder
    with open(folder / LOG_FILE, "ab") as out:
        return subprocess.Popen([record.interpreter, "-m", SERVE_MODULE, str(folder.resolve())], stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                start_new_session=True)


def wait_ready(record: DeploymentRecord, proc: subprocess.Popen[bytes], timeout_s: float,
               stop: Optional[threading.Event] = None) -> Optional[str]:
    """None once the server answers its liveness probe; else why it never will. Raises Stopped once `stop` is
    set (a scoring script's init() may take minutes: the command is not held until it ends)."""
    deadline = time.monotonic() + timeout_s
    log_path = records.deployment_dir(record.endpoint, record.name) / LOG_FILE
    while time.monotonic() < deadline:
        if stop is not None and stop.is_set():
            raise Stopped()
        if proc.poll() is not None:
            return inference_server.failure_line(log_path.read_text(errors="replace"))
        if _answers(record.port):
            return None
        time.sleep(0.01)  # a refused connect costs microseconds: a fine poll keeps the wait close to the server's
    return f"its server was not ready after {timeout_s:.0f} s"


def _answers(port: int) -> bool:
    """Azure's liveness route (GET /) answers 200. A plain socket, not http.client: its import (with ssl and the
    email package) is 28 ms of every `deploy`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            head = b""
            while len(head) < 12:
                chunk = s.recv(12 - len(head))
                if not chunk:
                    break
                head += chunk
            return head[:5] == b"HTTP/" and head[8:12] == b" 200"
    except OSError:
        return False


def is_server(pid: int) -> bool:
    if not pid_alive(pid):
        return False
    try:
        return SERVE_MODULE in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return True


def stop(record: DeploymentRecord, proc: Optional[subprocess.Popen[bytes]] = None) -> None:
    """Stop the server's whole process group: gunicorn's quick shutdown (SIGINT), then SIGKILL; then whatever of
    the group outlived its master (a worker still in the scoring script's init())."""
    pid = record.pid
    if pid is None:
        return
    if not (is_server(pid) or proc is not None):
        _stop_orphans(record, pid)
        return

    def gone(grace: Optional[float]) -> bool:  # the server itself (our child, or a pid from its record)
        if proc is not None:
            return within(proc.wait)(grace)
        deadline = time.monotonic() + (grace or 0.0)
        while pid_alive(pid):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        return True

    stop_group(pid, ((signal.SIGINT, 5.0), (signal.SIGKILL, 5.0)), gone)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is gone: the usual end
        pass


def _stop_orphans(record: DeploymentRecord, pgid: int) -> None:
    """A master killed outside mltrain (SIGKILL, the OOM killer) leaves its workers running in its process group,
    still serving on its port (chaos seed 5: `endpoints restart` and `delete` then left one for ever). Those of
    this deployment's folder in that group are killed; nothing else is touched."""
    folder = str(records.deployment_dir(record.endpoint, record.name).resolve())
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                group = int(f.read().rsplit(")", 1)[1].split()[2])
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if group == pgid and SERVE_MODULE.encode() in argv and folder.encode() in argv:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass
