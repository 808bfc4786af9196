"""The driver of a sweep or pipeline submitted through the Python API:
`python -m mltrain.cli.multirun REQUEST.json`.

Sweeps and pipelines compose through the composer mltrain's Hydra sweeper builds (mltrain.launch.composer),
so this driver is the `mltrain -m` app itself, started in its own process because a HyperDrive sweep or a
pipeline must outlive the notebook that submitted it. The request arrives typed
(JSON written by mltrain.api), the config folders reach the search path through the composition's own
context (mltrain.config.paths.extra_config_dirs), and the outcome goes back typed: outcome.json in the
request's folder, {"status", "error", "exit_code"}, written once the command ends.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mltrain.atomic import atomic_write
from mltrain.cli.main import launch_argv
from mltrain.config.paths import extra_config_dirs
from mltrain.errors import MltrainError, RunCanceled, RunFailed

OUTCOME = "outcome.json"


def drive(request_file: str) -> int:
    request = json.loads(Path(request_file).read_text(encoding="utf-8"))
    folder = Path(request["folder"])
    outcome = {"status": "Completed", "error": None, "exit_code": 0, "pid": os.getpid()}
    try:
        with extra_config_dirs(request.get("config_dirs") or ()):
            launch_argv(list(request["argv"]))
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
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / OUTCOME, json.dumps(outcome, indent=2))
        raise
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / OUTCOME, json.dumps(outcome, indent=2))
    return int(outcome["exit_code"])  # type: ignore[call-overload]


if __name__ == "__main__":
    from mltrain.ranks.script_main import exit_code_of, finish

    try:
        code = drive(sys.argv[1])
    except SystemExit as exc:
        code = exit_code_of(exc)
    finish(code, collect=False)
