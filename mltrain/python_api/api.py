"""The Python API: one typed request in, a run handle out (Azure ML's `experiment.submit(config)`).

    run = mltrain.submit("script", ["job.script=train.py", "job.source_directory=./src"])
    run.wait(show_output=True)        # like run.wait_for_completion(show_output=True)
    run.metrics(); run.download_file("outputs/model.pt", "model.pt")

    run = submit_request(Request(job="command", overrides=("job.command=nvidia-smi",)))

The request is composed, validated and frozen in this process (mltrain.launch.request) and its run
folder made here, so a mistake raises one MltrainError with the line the CLI prints, before anything
exists. The run itself is then driven by its own process (mltrain.python_api.driver), in its own session:
like an Azure ML run, it goes on when the submitting script or notebook ends. The handle is the run
handle (mltrain.python_api.handle.Run), the same for every backend.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, NoReturn, Optional, Sequence

from mltrain import backends
from mltrain.backends.local.guard import unmarked
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.config.paths import user_conf_dirs
from mltrain.launch import multirun_files, nesting
from mltrain.launch.orchestrate import create_run
from mltrain.launch.request import Request, freeze_request
from mltrain.python_api.driver import drive, listen
from mltrain.python_api.handle import Run
from mltrain.ranks.process import ForkedChild, follow
from mltrain.runs.console import Console
from mltrain.runs.waiting import wait_until

__all__ = ["Request", "Run", "submit", "submit_multirun", "submit_request"]


def submit_request(request: Request, console: Optional[Console] = None) -> Run:
    """Queue one run and return its handle as soon as the run exists (its driver runs on)."""
    nesting.refuse_in_a_rank()  # a job's code submitting itself again, or nested too deep: its process ends
    job = freeze_request(request)
    backends.get(job.backend).preflight([job])
    record = create_run(job, console or Console())
    if request.origin:
        record.update(origin=dict(request.origin))
    driver = _start_driver([sys.executable, "-m", "mltrain.python_api.driver", job.run_dir],
                           Path(job.run_dir) / "logs" / "driver.log", unmarked(dict(os.environ)), run_dir=job.run_dir)
    # on disk: a driver already running may have written its progress (and its pid: mltrain.python_api.driver)
    record.update_on_disk(driver_pid=driver.pid)  # a cancel asks the driver, never this process
    return Run(job.run_dir, driver)


# The one hand-off: every submission's driver (a run's, a sweep's, a pipeline's) starts in _start_driver, as a
# fork of this process or a new interpreter, in its own session: a Ctrl-C in the caller's terminal is not the
# run's cancel (run.cancel() is). A run submitted from a rank of another run outlives that run's driver: the
# guard's mark is not passed on.

def _start_driver(argv: List[str], log: Path, env: Dict[str, str], run_dir: Optional[str] = None) -> Any:
    """A driver process (`argv`: a new interpreter's command line), started with SIGTERM and SIGINT blocked (a
    signal mask survives fork and exec): a cancel sent while it starts waits until the driver listens, never kills
    it. A run's driver (`run_dir` given) is a fork of this process instead, when it is single-threaded.

    The fork: what the caller has imported (Hydra, mltrain) is the driver's at once, about half a second less
    than a new interpreter (benchmarks/bench_azureml_v1.py). Only from a single-threaded process (a fork copies
    one thread; a lock another thread held would stay held), so a notebook kernel, whose threads serve Jupyter,
    gets a new interpreter instead."""
    sys.stdout.flush()
    sys.stderr.flush()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    try:
        if run_dir is None or threading.active_count() > 1:
            with open(log, "ab") as out:
                return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, env=env)
        pid = os.fork()
        if pid == 0:
            _forked_driver(run_dir, log, env)  # never returns
        return ForkedChild(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _forked_driver(run_dir: str, log: Path, env: Dict[str, str]) -> NoReturn:
    code = 1
    try:  # the child: never back into the caller's code, whatever happens
        canceled = listen()  # first: a cancel sent the instant the driver exists is the run's cancel
        os.setsid()
        fd = os.open(str(log), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.environ.clear()
        os.environ.update(env)
        code = drive(run_dir, canceled)
    except BaseException:  # noqa: B036 - reported in the driver's log, then the child ends
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def submit(job: Optional[str] = None, overrides: Sequence[str] = (), cwd: Optional[str] = None,
           experiment_name: Optional[str] = None) -> Run:
    """Queue one run of job kind `job` with Hydra overrides; `cwd` adds that folder's `.mltrain/` and
    `conf/` config folders. Raises MltrainError with the CLI's one-line message when the config is invalid."""
    dirs = tuple(str(d) for d in user_conf_dirs(Path(cwd))) if cwd else ()
    return submit_request(Request(job=job, overrides=tuple(overrides), config_dirs=dirs,
                                     experiment_name=experiment_name))


@dataclass
class MultirunDriver:
    process: Any               # its driver process: a subprocess.Popen or a ForkedChild (pid, poll)
    folder: Path               # its request, its outcome (mltrain.launch.multirun_files) and its log

    def outcome(self) -> Optional[Dict[str, Any]]:
        """The driver's typed outcome once it has ended ({status, error, exit_code}); None while it runs."""
        written = multirun_files.read_outcome(self.folder)
        if written is not None:
            return written
        code = self.process.poll()
        if code is None:
            return None
        written = multirun_files.read_outcome(self.folder)  # written between the two looks
        if written is not None:
            return written
        return {"status": "Failed", "error": f"the driver exited with {code} (log: {self.folder / 'driver.log'})",
                "exit_code": code or 1}

    @property
    def log(self) -> Path:
        return self.folder / "driver.log"

    def wait(self, show_output: bool = False, timeout: Optional[float] = None) -> bool:
        """Until the driver has ended (its outcome written), its log streamed with show_output; False on timeout."""
        offset = [0]

        def ended() -> bool:
            if show_output:
                chunk, offset[0] = follow(self.log, offset[0])
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
            return self.outcome() is not None

        done = wait_until(ended, timeout=timeout, poll=0.2)
        ended()  # the last lines
        return done


def submit_multirun(request: Request, ready: str, name: str = "multirun", timeout: float = 300.0) -> MultirunDriver:
    """A sweep (`sweep.*` set) or a pipeline (`pipeline=NAME`) run by its own driver process (mltrain.cli.multirun)
    as `mltrain -m` runs it (mltrain.command.app). Returns once its engine has started: `ready` is the file
    whose appearance says so (the sweep's sweep.json, the pipeline run's run.json); a refusal before that raises
    the driver's MltrainError (its one line, read from the typed outcome)."""
    nesting.refuse_in_a_rank()
    folder = mltrain_home() / "drivers" / f"{name}_{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    file = multirun_files.write_request(folder, request.all_overrides(), request.config_dirs, request.all_nodes())
    process = _start_driver([sys.executable, "-m", "mltrain.cli.multirun", str(file)], folder / "driver.log",
                            nesting.driver_env(unmarked(dict(os.environ))))
    driver = MultirunDriver(process, folder)
    ready_file = Path(ready)
    waited = wait_until(lambda: ready_file.exists() or driver.outcome() is not None, timeout)
    outcome = driver.outcome()
    if outcome is not None and outcome.get("refused"):
        raise MltrainError(str(outcome.get("error")))
    if not waited:
        raise MltrainError(f"{name} did not start within {timeout:.0f}s (driver log: {driver.log})")
    return driver
