"""The fence around Azure's inference server (azureml-inference-server-http, checked against 1.5.1): all that
mltrain knows of it is here.

- It is installed once into a package layer of its own under $MLTRAIN_HOME/servers/, without its pinned
  dependencies (opentelemetry-sdk==1.33.0, pydantic~=2.12): flask, gunicorn, opentelemetry and pydantic come from
  the deployment's environment, as mltrain's own environment has them. Installing the pins would take the
  server's packages out from under mltrain (azure-ai-ml's azure-monitor-opentelemetry needs the newer sdk), and a
  layer with them cannot sit beside a newer `azure.monitor.opentelemetry`: its regular package shadows the
  layer's namespace portion, so the server fails to import. Checked: 1.5.1 serves with opentelemetry 1.45 and
  pydantic 2.14.
- The server is Azure's WSGI app (`azureml_inference_server_http.server.entry:app`) under gunicorn with the
  arguments Azure's `azmlinfsrv` gives it (amlserver_linux.run), except the address: Azure's binds 0.0.0.0 and
  mltrain binds the endpoint's host only. The settings go in as the environment variables Azure's server reads.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home

VERSION = "1.5.1"
#: pytz: inference-schema imports it (its numpy/pandas support), and mltrain's own environment has none
PACKAGES = [f"azureml-inference-server-http=={VERSION}", "inference-schema==1.8", "pydantic-settings>=2.6,<3",
            "python-dotenv>=1.0", "pytz"]
APP = "azureml_inference_server_http.server.entry:app"
READY = ".ready"
#: Azure's own default worker timeout (constants.DEFAULT_WORKER_TIMEOUT_SECONDS)
WORKER_TIMEOUT_S = 300


def layer_dir() -> Path:
    """Named for what it holds: a change to PACKAGES is a new layer, never a half-updated old one."""
    digest = hashlib.sha256("\n".join(PACKAGES).encode()).hexdigest()[:8]
    return mltrain_home() / "servers" / f"azmlinfsrv-{VERSION}-{digest}"


def ensure_layer(log: Callable[[str], None] = print) -> Path:
    """The server's package layer, installed once (a lock makes concurrent deployments install it once; the
    `.ready` marker comes last, so a failed install is never taken as usable)."""
    target = layer_dir()
    if (target / READY).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / READY).exists():
            return target
        log(f"installing Azure's inference server {VERSION} (once, into {target})")
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                              "--no-deps", "--target", str(tmp), *PACKAGES], capture_output=True, text=True)
        if pip.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = " | ".join((pip.stderr or pip.stdout).strip().splitlines()[-2:])
            raise MltrainError(f"installing Azure's inference server ({' '.join(PACKAGES)}) failed: {tail}")
        (tmp / READY).write_text(VERSION)
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    return target


def server_environment(entry_script: Optional[str], code_dir: Optional[str], model_dir: str, service_name: str,
                       request_timeout_ms: int) -> Dict[str, str]:
    """The variables Azure's server reads its settings from (server/config.py's aliases)."""
    env = {"AZUREML_MODEL_DIR": model_dir, "SERVICE_NAME": service_name, "SCORING_TIMEOUT_MS": str(request_timeout_ms),
           "AML_APP_INSIGHTS_ENABLED": "false", "AZUREML_LOG_LEVEL": os.environ.get("AZUREML_LOG_LEVEL", "INFO")}
    if entry_script:
        env["AZUREML_ENTRY_SCRIPT"] = entry_script
    if code_dir:
        env["AML_APP_ROOT"] = code_dir
    return env


def gunicorn_argv(binds: List[str], workers: int, app: str, threads: int = 1,
                  worker_class: Optional[str] = None) -> List[str]:
    """gunicorn's command line as azmlinfsrv builds it, with the given addresses, SO_REUSEPORT (every deployment
    of an endpoint listens on its port), a worker class where one is given, and no control socket (gunicorn 24+
    opens one at a fixed path in the home folder, which two servers would fight over)."""
    import gunicorn.config  # heavy

    argv = ["gunicorn"]
    for address in binds:
        argv += ["-b", address]
    argv += ["-w", str(workers), "--timeout", str(WORKER_TIMEOUT_S), "--reuse-port",
             *(["--threads", str(threads)] if threads > 1 else []),  # a deployment's concurrent requests per worker
             *(["-k", worker_class] if worker_class else []),
             "--access-logfile", "-", "--error-logfile", "/dev/null"]
    if any(setting.name == "no_control_socket" for setting in gunicorn.config.KNOWN_SETTINGS):
        argv.append("--no-control-socket")
    return argv + [app]


def azure_app() -> Any:
    """Azure's WSGI app; importing it reads the settings and runs the scoring script's init()."""
    module, _, attr = APP.partition(":")
    return getattr(importlib.import_module(module), attr)


_COLOUR = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # terminal colour codes (torch's errors carry some)
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)|[A-Za-z_][\w.]*): .+")


def failure_line(log_text: str) -> str:
    """The line that says why a server ended: the scoring script's own exception (the last exception line of
    a traceback that is not the server's wrapper of it), else gunicorn's reason."""
    lines = _COLOUR.sub("", log_text).splitlines()
    found: Optional[str] = None
    in_traceback = False
    for line in lines:
        if line.startswith("Traceback (most recent call last)") or line.endswith("Traceback (most recent call last):"):
            in_traceback = True
            continue
        if in_traceback and not line.startswith(" ") and _EXCEPTION_LINE.match(line):
            in_traceback = False
            if not line.startswith("azureml_inference_server_http."):
                found = line.strip()
    if found:
        return found
    for line in reversed(lines):
        if "Reason:" in line or "Connection in use" in line or "Error" in line:
            return line.split(" - ", 1)[-1].strip()
    return lines[-1].strip() if lines else "the server ended before it was ready, with nothing in its log"
