"""The Python API, the programmatic twin of the CLI (Azure ML's `experiment.submit(config)`).

    run = mltrain.submit("script", ["job.script=train.py", "job.source_directory=./src"])
    run.wait(show_output=True)        # like run.wait_for_completion(show_output=True)
    run.metrics(); run.download_file("outputs/model.pt", "model.pt")

`submit` starts the `mltrain` command itself in the background (its own session, so it outlives
the caller), with a run id chosen here: the same launch path as the CLI, and it returns as soon as
the run is queued.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mltrain.configpath import mltrain_home
from mltrain.errors import MltrainError, RunCanceled, RunFailed
from mltrain.frozen import new_run_id
from mltrain.records import CANCELED, FAILED, TERMINAL, RunRecord
from mltrain.supervisor import follow


class Run:
    """A handle on one run directory; every property reads the run record afresh."""

    def __init__(self, run_dir: str | Path, driver: Optional[subprocess.Popen] = None) -> None:
        self.run_dir = Path(run_dir)
        self._driver = driver

    @classmethod
    def get(cls, run_id: str, root: Optional[str] = None) -> "Run":
        from mltrain.records import find_run

        return cls(find_run(Path(root).expanduser() if root else mltrain_home() / "runs", run_id).dir)

    @property
    def id(self) -> str:
        return self.run_dir.name

    @property
    def record(self) -> Dict[str, Any]:
        return RunRecord.load(self.run_dir).data

    @property
    def status(self) -> str:
        return self.record["status"]

    @property
    def outputs_dir(self) -> Path:
        return self.run_dir / "outputs"

    def _done(self) -> bool:
        if self.status not in TERMINAL:
            return False
        return self._driver is None or self._driver.poll() is not None

    def wait(self, show_output: bool = False, raise_on_error: bool = True, timeout: Optional[float] = None) -> str:
        """Block until the run ends; with show_output, stream rank 0's log and status changes."""
        deadline = None if timeout is None else time.monotonic() + timeout
        log_path = self.run_dir / "logs" / "rank_0.log"
        offset, last_status = 0, None
        while True:
            done = self._done()  # read before the log, so nothing written before the end is missed
            if show_output:
                status = self.status
                if status != last_status:
                    print(f"mltrain: {self.id}: {status}", flush=True)
                    last_status = status
                chunk, offset = follow(log_path, offset)
                if chunk:
                    sys.stdout.write(chunk.decode("utf-8", "replace"))
                    sys.stdout.flush()
            if done:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"run {self.id} still {self.status} after {timeout}s")
            time.sleep(0.1)
        status = self.status
        if raise_on_error and status in (FAILED, CANCELED):
            error = RunCanceled if status == CANCELED else RunFailed
            raise error(f"run {self.id} {status}: {self.record.get('error') or ''}".strip())
        return status

    def metrics(self, name: Optional[str] = None) -> Dict[str, Any]:
        """{name: value} for metrics logged once, {name: [values]} otherwise (Azure: get_metrics)."""
        from mltrain.metrics import read_metrics
        from mltrain.run import summarize

        return summarize(read_metrics(self.run_dir / "metrics.jsonl"), name)

    def get_file_names(self) -> List[str]:
        skip = {"snapshot"}
        return sorted(str(p.relative_to(self.run_dir)) for p in self.run_dir.rglob("*")
                      if p.is_file() and p.relative_to(self.run_dir).parts[0] not in skip)

    def download_file(self, name: str, output_file_path: Optional[str] = None) -> str:
        """Copy a file of the run (e.g. 'outputs/model.pt') to output_file_path (default: its base name)."""
        source = self.run_dir / name
        if not source.is_file():
            raise MltrainError(f"run {self.id} has no file '{name}' (files: {', '.join(self.get_file_names()[:20])})")
        target = Path(output_file_path or Path(name).name)
        if target.is_dir():
            target = target / Path(name).name
        shutil.copyfile(source, target)
        return str(target)

    def cancel(self) -> None:
        """Stop every rank; the run ends Canceled."""
        pid = self.record.get("driver_pid")
        if pid and self.status not in TERMINAL:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, status={self.status!r}, dir={str(self.run_dir)!r})"


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
        driver = subprocess.Popen([sys.executable, "-m", "mltrain", *args], cwd=cwd, stdout=out,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
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
