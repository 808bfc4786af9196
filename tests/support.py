"""Helpers shared by the test modules (fixtures stay in conftest.py): running the installed
`mltrain`, reading run records and metrics, and the CI switch that turns a missing cluster into a failure."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mltrain.endpoints import endpoint_port

SCRIPTS = Path(__file__).parent / "scripts"


def free_port(span: int = 2) -> int:
    """A port, and the `span - 1` after it, free to listen on now (`mltrain ui` takes --port and --port + 1).

    Drawn where endpoints draw theirs, outside the kernel's ephemeral range: a port the OS hands out (bind
    to 0) can be handed out again to any connection made before the server starts, and a test that runs jobs
    first (gloo's sockets, MLflow's client) made `mltrain ui` find its port taken (CI, 2026-11-28); and above
    Slurm jobs' rendezvous ports, which the other worker's Slurm tests take by number."""
    ranges = [range(r.start, r.stop - span + 1) for r in endpoint_port.drawn_ranges() if len(r) >= span]
    for _ in range(200):
        port = endpoint_port.pick(ranges)
        try:
            for offset in range(span):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port outside the ephemeral range")


def mltrain_exe() -> list:
    exe = shutil.which("mltrain", path=str(Path(sys.executable).parent))
    return [exe] if exe else [sys.executable, "-m", "mltrain"]


class Result:
    def __init__(self, proc: subprocess.CompletedProcess):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr


def run_mltrain(*args: str, cwd: Path, timeout: float = 120, env: dict | None = None) -> Result:
    """The installed `mltrain` with a deadline: a job stuck pending fails the test instead of hanging CI."""
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


def leftovers(home: Path) -> list:
    """Everything under the runs folder: a refused command must leave none of it (not only no run.json:
    no sweep folder, no half-made run directory)."""
    root = home / "runs"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.is_dir() else []


def only_run(home: Path) -> dict:
    found = runs(home)
    assert len(found) == 1, f"expected one run, found {len(found)}"
    return found[0]


def metric_rows(run_dir) -> list:
    """Every record of a run's metrics.jsonl, in the order written (the one metrics reader of the suite)."""
    path = Path(run_dir) / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def slow_to_snapshot(project: Path) -> None:
    """3,000 small files in the project: each run's snapshot takes a while, a window in which to kill a driver
    between making a run and what it does next."""
    for i in range(30):
        (project / "data" / f"d{i}").mkdir(parents=True)
        for j in range(100):
            (project / "data" / f"d{i}" / f"f{j}.txt").write_text(f"{i} {j}\n")


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


def ci() -> bool:
    """Whether this is a CI run (CI set to any true value, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def require(problem: str | None, env_var: str, what: str) -> None:
    """Skip with one line when `what` is missing, unless CI demands it (env_var=1, or CI true): then fail."""
    if problem is None:
        return
    if os.environ.get(env_var) == "1" or ci():
        pytest.fail(f"{what} is required here ({env_var}=1): {problem}")
    pytest.skip(problem)


def wait_for_checkpoint(home: Path, epoch: int = 1, timeout: float = 120) -> dict:
    """The first run's record once the trainer has written the checkpoint of `epoch`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = runs(home)
        if found and (Path(found[0]["dir"]) / "checkpoints" / f"epoch_{epoch}.pt").exists():
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no checkpoint of epoch {epoch} within {timeout}s")


def until(check, limit_s: float, what: str, every_s: float = 0.1):
    """Poll until check() returns something true and return it; the limit only catches a hang (nothing
    is asserted about how long it took)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(every_s)
    raise AssertionError(f"{what} within {limit_s}s")


@contextlib.contextmanager
def tmpfs(mount: Path, size: str):
    """A real tmpfs of `size` mounted at `mount` (made here), unmounted whatever happens; skips where
    mounting needs a root this process is not."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def killed_after(argv: list, delay: float, cwd=None, env=None) -> str:
    """Start a command in a session of its own, SIGKILL its whole process group `delay` seconds later:
    "killed", or "finished" when it had ended by then."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    return "killed" if proc.returncode == -signal.SIGKILL else "finished"
