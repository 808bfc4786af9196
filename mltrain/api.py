"""The Python API: one typed request in, a run handle out (Azure ML's `experiment.submit(config)`).

    run = mltrain.submit("script", ["job.script=train.py", "job.source_directory=./src"])
    run.wait(show_output=True)        # like run.wait_for_completion(show_output=True)
    run.metrics(); run.download_file("outputs/model.pt", "model.pt")

    run = mltrain.submit_request(JobRequest(job="command", overrides=("job.command=nvidia-smi",)))

The request is composed, validated and frozen in this process (mltrain.launch.request) and its run
folder made here, so a mistake raises one MltrainError with the line the CLI prints, before anything
exists. The run itself is then driven by its own process (mltrain.launch.driver), in its own session:
like an Azure ML run, it goes on when the submitting script or notebook ends. The handle is the run
handle (mltrain.handle.Run), the same for every backend.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Optional, Sequence

from mltrain import backends
from mltrain.backends.local.guard import unmarked
from mltrain.config.paths import user_conf_dirs
from mltrain.handle import Run
from mltrain.launch.orchestrate import create_run
from mltrain.launch.request import JobRequest, freeze_request
from mltrain.runs.console import Console

__all__ = ["JobRequest", "Run", "submit", "submit_request"]


def submit_request(request: JobRequest, console: Optional[Console] = None) -> Run:
    """Queue one run and return its handle as soon as the run exists (its driver runs on)."""
    job = freeze_request(request)
    backends.get(job.backend).preflight()
    record = create_run(job, console or Console())
    if request.origin:
        record.update(origin=dict(request.origin))
    log = Path(job.run_dir) / "logs" / "driver.log"
    with open(log, "ab") as out:
        # Its own session: a Ctrl-C in the caller's terminal is not the run's cancel (run.cancel() is).
        # A run submitted from a rank of another run outlives that run's driver: the guard's mark is not passed.
        driver = subprocess.Popen([sys.executable, "-m", "mltrain.launch.driver", job.run_dir], stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                                  env=unmarked(dict(os.environ)))
    record.update(driver_pid=driver.pid)  # a cancel asks the driver, never this process
    return Run(job.run_dir, driver)


def submit(job: Optional[str] = None, overrides: Sequence[str] = (), cwd: Optional[str] = None,
           experiment_name: Optional[str] = None) -> Run:
    """Queue one run of job kind `job` with Hydra overrides; `cwd` adds that folder's `.mltrain/` and
    `conf/` config folders. Raises MltrainError with the CLI's one-line message when the config is invalid."""
    dirs = tuple(str(d) for d in user_conf_dirs(Path(cwd))) if cwd else ()
    return submit_request(JobRequest(job=job, overrides=tuple(overrides), config_dirs=dirs,
                                     experiment_name=experiment_name))
