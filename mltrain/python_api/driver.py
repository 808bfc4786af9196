"""The driver of a submission made through the Python API: `python -m mltrain.python_api.driver TARGET`, or a
fork of the submitting process (mltrain.python_api.api). One driver for every request: TARGET is either

- a run folder: a run the caller already composed, validated, froze and created (`mltrain.submit`, the SDKs'
  command jobs), so every mistake was raised there as one MltrainError. What is left, running it to its end,
  is this process; or
- a request file (mltrain.launch.multirun_files): a sweep or a pipeline, composed and run here as `mltrain -m`
  runs it (mltrain.command.app), because its engine, not one run, is what must go on.

Either way the driver outlives the caller, as an Azure ML run outlives the notebook that submitted it (a control
script that submits and exits leaves its run going), and nothing passes through argv or the environment but
the target. A run's failure before its backend takes over is written to run.json as the run's error; a request's
outcome to outcome.json ({status, error, exit_code}): typed, read back by the handle, never parsed from a log.

A run's cancel (SIGTERM, from `run.cancel()`) can come the instant the driver exists: `listen()` takes it
before anything else, and the run then ends Canceled, never 'driver lost'.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Dict, Optional

from mltrain.base.signals import SignalsSetEvent  # light: the standard library only


def listen() -> threading.Event:
    """SIGTERM/SIGINT from now on set the returned event (the run's cancel) instead of ending the driver."""
    canceled = threading.Event()
    SignalsSetEvent(canceled).install()  # for the driver's life; no lock taken in a handler (mltrain.base.signals)
    unblock()
    return canceled


def unblock() -> None:
    """A driver is started with SIGTERM and SIGINT blocked (mltrain.python_api.api): take any that came while
    it started, now."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})


def is_request(target: str) -> bool:
    from mltrain.launch.multirun_files import REQUEST  # startup

    return Path(target).name == REQUEST


def drive(run_dir: str, canceled: Optional[threading.Event] = None) -> int:
    """Run a created run to its end."""
    canceled = canceled if canceled is not None else listen()
    # imported after listen(): a cancel during these imports is not missed
    from mltrain.backends.base import failure_text  # startup
    from mltrain.base.errors import MltrainError  # startup
    from mltrain.jobspec.job import FrozenJob  # startup
    from mltrain.jobspec.status import FAILED, TERMINAL  # startup
    from mltrain.launch.orchestrate import execute  # startup
    from mltrain.runs.console import Console  # startup
    from mltrain.runs.lifecycle import finish  # startup
    from mltrain.runs.record import RunRecord  # startup

    record = RunRecord.load(run_dir)
    if record.status in TERMINAL:  # canceled before this process started: nothing to run
        return 0
    # This process is the run's driver: said here, where every later write of run.json comes from. The
    # submitting process also writes it once the driver exists, but a driver that loaded the record before
    # that write would otherwise write the submitter's pid back (a cancel or a liveness check would then
    # ask the submitter).
    record.update(driver_pid=os.getpid())
    console = Console()
    try:
        job = FrozenJob.load(run_dir)
        result = execute([job], [record], [console], cancel=canceled)[0]
    except MltrainError as exc:
        finish(record, FAILED, error=str(exc), console=console)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the run must end with a status and its reason
        finish(record, FAILED, error=f"the driver failed: {failure_text(exc)}", console=console)
        raise
    return 0 if result.status not in (FAILED,) else 1


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


def drive_target(target: str, canceled: Optional[threading.Event]) -> int:
    """A run folder (`canceled`: its cancel, listened for since the driver began) or a request file."""
    return drive_request(target) if is_request(target) else drive(target, canceled)


if __name__ == "__main__":
    target = sys.argv[1]
    if is_request(target):
        early = None
        unblock()  # the engine installs its own cancel (mltrain.command.app)
    else:
        early = listen()
    from mltrain.ranks.script_main import exit_code_of  # startup
    from mltrain.ranks.script_main import finish as exit_now

    try:
        code = drive_target(target, early)
    except SystemExit as exc:
        code = exit_code_of(exc)  # type: ignore[no-untyped-call]  # a rank-side module kept free of annotations
    exit_now(code, collect=False)  # type: ignore[no-untyped-call]
