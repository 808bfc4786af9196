"""The driver of a run submitted through the Python API: `python -m mltrain.launch.driver RUN_DIR`.

`mltrain.submit` (and the Azure ML SDK stand-ins) compose, validate, freeze and create the run in the
caller's process, so every mistake is raised there as one MltrainError. What is left, running the
created run to its end, is this process: it must outlive the caller, as an Azure ML run outlives the
notebook that submitted it (a control script that submits and exits leaves its run going). It reads
the frozen job from the run folder, so nothing passes through argv or the environment but the folder.
A failure before the backend takes over is written to run.json as the run's error (typed, read back
by the handle), never left for anyone to parse from a log.
"""
from __future__ import annotations

import sys

from mltrain.backends.base import failure_text
from mltrain.errors import MltrainError
from mltrain.launch.orchestrate import execute
from mltrain.runs.console import Console
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord
from mltrain.spec.job import FrozenJob
from mltrain.spec.status import FAILED, TERMINAL


def drive(run_dir: str) -> int:
    record = RunRecord.load(run_dir)
    if record.status in TERMINAL:  # canceled before this process started: nothing to run
        return 0
    console = Console()
    try:
        job = FrozenJob.load(run_dir)
        result = execute([job], [record], [console])[0]
    except MltrainError as exc:
        finish(record, FAILED, error=str(exc), console=console)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the run must end with a status and its reason
        finish(record, FAILED, error=f"the driver failed: {failure_text(exc)}", console=console)
        raise
    return 0 if result.status not in (FAILED,) else 1


if __name__ == "__main__":
    from mltrain.ranks.script_main import exit_code_of
    from mltrain.ranks.script_main import finish as exit_now

    try:
        code = drive(sys.argv[1])
    except SystemExit as exc:
        code = exit_code_of(exc)  # type: ignore[no-untyped-call]  # a rank-side module kept free of annotations
    exit_now(code, collect=False)  # type: ignore[no-untyped-call]
