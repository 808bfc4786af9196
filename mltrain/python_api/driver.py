"""The driver of a run submitted through the Python API: `python -m mltrain.python_api.driver RUN_DIR`, or a
fork of the submitting process (mltrain.python_api.api), started by the API's one hand-off (`_start_driver`).

`mltrain.submit` (and the Azure ML SDK stand-ins) compose, validate, freeze and create the run in the caller's
process, so every mistake is raised there as one MltrainError. What is left, running the created run to its end,
is this process: it must outlive the caller, as an Azure ML run outlives the notebook that submitted it (a
control script that submits and exits leaves its run going). It reads the frozen job from the run folder, so
nothing passes through argv or the environment but the folder. A failure before the backend takes over is
written to run.json as the run's error (typed, read back by the handle), never left for anyone to parse from a
log. (A sweep's or pipeline's driver, mltrain.cli.multirun, is started by the same hand-off.)

A run's cancel (SIGTERM, from `run.cancel()`) can come the instant the driver exists: `listen()` takes it
before anything else, and the run then ends Canceled, never 'driver lost'.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Optional

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


if __name__ == "__main__":
    early = listen()
    from mltrain.ranks.script_main import exit_code_of  # startup
    from mltrain.ranks.script_main import finish as exit_now

    try:
        code = drive(sys.argv[1], early)
    except SystemExit as exc:
        code = exit_code_of(exc)  # type: ignore[no-untyped-call]  # a rank-side module kept free of annotations
    exit_now(code, collect=False)  # type: ignore[no-untyped-call]
