"""The driver of a sweep or pipeline submitted through the Python API: `python -m mltrain.cli.multirun REQUEST.json`,
started by the API's one hand-off (mltrain.python_api.api `_start_driver`), always as a new interpreter: it runs
the engine (mltrain.command.app), which the API's own package may not import (mltrain.azureml.sdk_v2 imports the
API, and the engine the v2 front end).

The request arrives typed (JSON written by mltrain.launch.multirun_files: overrides, config folders and in-memory
config options) and runs as `mltrain -m` runs it, in this process, which is a process of its own because a
HyperDrive sweep or a pipeline must outlive the notebook that submitted it. The outcome goes back typed:
outcome.json in the request's folder, {"status", "error", "exit_code"}, written once the command ends.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Dict


def drive_request(request_file: str) -> int:
    """Run a sweep's or pipeline's request to its end, as `mltrain -m` would; its outcome written typed. Its
    cancel is the engine's own (SIGTERM or SIGINT: the sweep or pipeline ends Canceled)."""
    from mltrain.base.errors import MltrainError, RunCanceled, RunFailed  # startup
    from mltrain.command.app import run_app  # startup
    from mltrain.config.memory_nodes import ConfigNode  # startup
    from mltrain.launch import multirun_files  # startup
    from mltrain.launch.request import Request  # startup

    request = multirun_files.read_request(Path(request_file))
    folder = Path(request["folder"])
    outcome: Dict[str, Any] = {"status": "Completed", "error": None, "exit_code": 0, "pid": os.getpid()}
    try:
        nodes = tuple(ConfigNode(**node) for node in request.get("nodes") or ())
        run_app(Request(overrides=tuple(request["overrides"]), config_dirs=tuple(request.get("config_dirs") or ()),
                        nodes=nodes), isolate=False)  # this process runs nothing else
    except (RunFailed, RunCanceled) as exc:
        outcome.update(status="Canceled" if isinstance(exc, RunCanceled) else "Failed", error=str(exc),
                       exit_code=exc.exit_code)
    except MltrainError as exc:
        outcome.update(status="Failed", error=str(exc), exit_code=exc.exit_code, refused=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if code:
            outcome.update(status="Failed", error=f"exited with {code}", exit_code=code)
    except BaseException as exc:  # noqa: BLE001 - written down for the caller, then raised as usual
        outcome.update(status="Failed", error=f"{type(exc).__name__}: {exc}", exit_code=1)
        multirun_files.write_outcome(folder, outcome)
        raise
    multirun_files.write_outcome(folder, outcome)
    return int(outcome["exit_code"])



if __name__ == "__main__":
    import signal

    # started with SIGTERM and SIGINT blocked (mltrain.python_api.api): the engine installs its own cancel
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    from mltrain.ranks.script_main import exit_code_of, finish

    try:
        code = drive_request(sys.argv[1])
    except SystemExit as exc:
        code = exit_code_of(exc)
    finish(code, collect=False)
