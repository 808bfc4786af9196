"""Shared fixtures: every test gets its own MLTRAIN_HOME and runs the installed `mltrain` command."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def mltrain_exe() -> list:
    exe = shutil.which("mltrain", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "mltrain"]


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("MLTRAIN_HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path) -> Path:
    """A user project folder holding the test scripts, as a user would point job.source_directory at."""
    p = tmp_path / "proj"
    shutil.copytree(SCRIPTS, p)
    return p


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr


def run_mltrain(*args: str, cwd: Path, timeout: float = 120, env: dict | None = None) -> Result:
    proc = subprocess.run(
        mltrain_exe() + list(args), cwd=cwd, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    return Result(proc)


def runs(home: Path) -> list:
    root = home / "runs"
    if not root.is_dir():
        return []
    out = [json.loads((d / "run.json").read_text()) | {"dir": str(d)} for d in root.iterdir() if (d / "run.json").is_file()]
    return sorted(out, key=lambda r: r.get("created") or r["phases"]["Queued"])


def only_run(home: Path) -> dict:
    found = runs(home)
    assert len(found) == 1, f"expected one run, found {len(found)}"
    return found[0]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def require(problem: str | None, env_var: str, what: str) -> None:
    """Skip with one line when `what` is missing, unless CI demands it (env_var=1): then fail."""
    if problem is None:
        return
    if os.environ.get(env_var) == "1":
        pytest.fail(f"{what} is required here ({env_var}=1): {problem}")
    pytest.skip(problem)


def wait_for_checkpoint(home: Path, epoch: int = 1, timeout: float = 120) -> dict:
    """The first run's record once the trainer has written the checkpoint of `epoch`."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = runs(home)
        if found and (Path(found[0]["dir"]) / "checkpoints" / f"epoch_{epoch}.pt").exists():
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint of epoch {epoch} within {timeout}s")
