"""The Python API, the programmatic twin of the CLI (Azure ML's `experiment.submit(config)`).

    run = mltrain.submit("script", ["job.script=train.py", "job.source_directory=./src"])
    run.wait(show_output=True)        # like run.wait_for_completion(show_output=True)
    run.metrics(); run.download_file("outputs/model.pt", "model.pt")

`submit` starts the `mltrain` command itself in the background (its own session, so it outlives
the caller), with a run id chosen here: the same launch path as the CLI, and it returns as soon as
the run exists. The handle it returns is the run handle (mltrain.handle.Run), the same for
every backend.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

from mltrain.backends.local.guard import unmarked
from mltrain.config.paths import mltrain_home
from mltrain.errors import MltrainError
from mltrain.handle import Run
from mltrain.spec.job import new_run_id

__all__ = ["Run", "submit"]


def _runs_root(overrides: Sequence[str]) -> Path:
    for o in overrides:
        if o.startswith("run.root="):
            return Path(o.split("=", 1)[1]).expanduser()
    return mltrain_home() / "runs"


def submit(job: Optional[str] = None, overrides: Sequence[str] = (), cwd: Optional[str] = None,
           experiment_name: Optional[str] = None, timeout: float = 120) -> Run:
    """Queue one run through the `mltrain` command and return its handle once it is queued.

    Raises MltrainError with the CLI's one-line message when the config is invalid.
    """
    args = [f"job={job}"] if job else []
    args += list(overrides)
    name = experiment_name or (job or "mltrain")
    if experiment_name:
        args.append(f"experiment_name={experiment_name}")
    run_id = new_run_id(name)
    args.append(f"run.id={run_id}")
    run_dir = _runs_root(args) / run_id
    log_dir = Path(tempfile.gettempdir()) / "mltrain-drivers"
    log_dir.mkdir(exist_ok=True)
    driver_log = log_dir / f"{run_id}.log"
    with open(driver_log, "wb") as out:
        # a run submitted from a rank of another run outlives that run's driver: the guard's mark is not passed
        driver = subprocess.Popen([sys.executable, "-m", "mltrain", *args], cwd=cwd, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                  env=unmarked(dict(os.environ)))
    deadline = time.monotonic() + timeout
    while not (run_dir / "run.json").is_file():
        if driver.poll() is not None:
            text = driver_log.read_text(errors="replace").strip().splitlines()
            message = next((l for l in reversed(text) if l.startswith("mltrain: error: ")), text[-1] if text else "")
            raise MltrainError(message.replace("mltrain: error: ", "", 1) or f"mltrain exited with {driver.returncode}")
        if time.monotonic() > deadline:
            raise MltrainError(f"run {run_id} was not queued within {timeout}s (driver log: {driver_log})")
        time.sleep(0.05)
    return Run(run_dir, driver)
