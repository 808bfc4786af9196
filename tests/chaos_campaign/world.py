"""What a trial looks at and acts on: the mltrain command, the process table, Slurm's queue, run records.

A trial's processes are found by the `MLTRAIN_HOME` in their environment (every rank, worker, server and
driver of the trial inherits it), its Slurm jobs by their working directory under the trial's folder.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, TypeVar

T = TypeVar("T")
#: A full-disk trial's run folders: room for the scenario's runs, filled by the fault.
SMALL_DISK_MB = 64
FILLER = ".chaos-filler"


def mltrain_exe() -> List[str]:
    """The `mltrain` beside this interpreter (the venv's), else `python -m mltrain`."""
    beside = Path(sys.executable).with_name("mltrain")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "mltrain"]


def until(check: Callable[[], Optional[T]], limit_s: float, what: str, every: float = 0.05) -> T:
    deadline = time.monotonic() + limit_s
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} (after {limit_s:.0f} s)")
        time.sleep(every)


@dataclass
class Done:
    argv: List[str]
    rc: int
    out: str
    err: str
    took: float


class Trial:
    """One trial's folder: `home` (MLTRAIN_HOME), `project` (the user's repository), `markers` (each unit of
    work writes one file there when it has done its work)."""

    def __init__(self, root: Path, seed: int, slurm_conf: Optional[str] = None, small_disk: bool = False):
        self.root = root
        self.seed = seed
        self.home = root / "home"
        self.project = root / "project"
        self.markers = root / "markers"
        for d in (self.home, self.project, self.markers):
            d.mkdir(parents=True, exist_ok=True)
        self.slurm_conf = slurm_conf
        self.log: List[str] = []
        self.said: List[str] = []  # what the recovery's commands printed
        #: The run folders on a small tmpfs of their own, for a full-disk fault (home/runs: run.root's default).
        self.disk: Optional[Path] = None
        if small_disk:
            self.disk = self.home / "runs"
            self.disk.mkdir(parents=True, exist_ok=True)
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SMALL_DISK_MB}m", "tmpfs", str(self.disk)],
                           check=True, capture_output=True, timeout=30)

    def fill_disk(self) -> str:
        """Fill the run folders' disk to its last byte (what is written next fails with ENOSPC)."""
        assert self.disk is not None
        written = 0
        with open(self.disk / FILLER, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 1048576)
                    f.flush()
                    written += 1
            except OSError:
                pass
        return f"the run folders' disk filled ({written} MiB written)"

    def make_room(self) -> None:
        if self.disk is not None:
            (self.disk / FILLER).unlink(missing_ok=True)
            self.log.append("# room made: the filler removed")

    def env(self, **extra: str) -> Dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "MLTRAIN_RUN"))}
        env.update(MLTRAIN_HOME=str(self.home), CHAOS_MARKERS=str(self.markers), PYTHONUNBUFFERED="1")
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        env.update(extra)
        return env

    def start(self, *args: str, cwd: Optional[Path] = None) -> subprocess.Popen:
        """The foreground command, in a session of its own as a terminal's job would be."""
        argv = mltrain_exe() + list(args)
        self.log.append("$ mltrain " + " ".join(args))
        out = open(self.root / "foreground.out", "ab")
        return subprocess.Popen(argv, cwd=cwd or self.project, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)

    def mltrain(self, *args: str, timeout: float = 300, cwd: Optional[Path] = None) -> Done:
        argv = mltrain_exe() + list(args)
        started = time.monotonic()
        self.log.append("$ mltrain " + " ".join(args))
        try:
            p = subprocess.run(argv, cwd=cwd or self.project, env=self.env(), capture_output=True, text=True,
                               timeout=timeout, stdin=subprocess.DEVNULL)
            done = Done(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - started)
        except subprocess.TimeoutExpired as e:
            done = Done(argv, 124, _text(e.stdout), _text(e.stderr) + f"\n(timed out after {timeout:.0f} s)",
                        time.monotonic() - started)
        self.log.append(f"  -> {done.rc} in {done.took:.1f} s" + (f": {done.err.strip()[-300:]}" if done.rc else ""))
        self.said.append(done.out + done.err)
        return done

    def marker_names(self) -> List[str]:
        """One name per unit of work done (a marker is `<unit>.<pid>.<n>`: several for a unit done twice)."""
        return sorted(p.name.split(".")[0] for p in self.markers.iterdir() if not p.name.startswith("."))

    # ---------------------------------------------------------------- records
    def run_records(self) -> List[dict]:
        found = []
        runs = self.home / "runs"
        for d in sorted(runs.iterdir()) if runs.is_dir() else []:
            f = d / "run.json"
            if f.is_file():
                try:
                    found.append(json.loads(f.read_text()))
                except ValueError:
                    found.append({"id": d.name, "status": "unreadable"})
        return found

    def sweep_docs(self) -> List[dict]:
        return [json.loads(p.read_text()) for p in sorted((self.home / "runs" / "_sweeps").glob("*/sweep.json"))]

    def sweep_dirs(self) -> List[Path]:
        return [p.parent for p in sorted((self.home / "runs" / "_sweeps").glob("*/sweep.json"))]

    # ---------------------------------------------------------------- what is left running
    def processes(self) -> List[int]:
        """Live processes of this trial: those whose environment holds its MLTRAIN_HOME."""
        mark = f"MLTRAIN_HOME={self.home}".encode()
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{entry}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if mark in env and state != "Z":
                found.append(int(entry))
        return found

    def processes_running(self, *names: str) -> List[Tuple[str, int]]:
        """("worker<pid>", pid) of the trial's processes whose command line holds one of `names`."""
        found = []
        for pid in self.processes():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(name in cmd for name in names):
                found.append((f"worker{pid}", pid))
        return found

    def describe(self, pids: List[int]) -> List[str]:
        out = []
        for pid in pids:
            try:
                out.append(f"{pid} " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160])
            except OSError:
                pass
        return out

    def slurm_jobs(self) -> List[str]:
        """Slurm jobs still queued or running whose working directory is in this trial's folder."""
        if not self.slurm_conf or not shutil.which("squeue"):
            return []
        p = subprocess.run(["squeue", "-h", "-o", "%i|%T|%Z"], capture_output=True, text=True, timeout=30,
                           env={**os.environ, "SLURM_CONF": self.slurm_conf})
        return [line for line in p.stdout.splitlines() if line.split("|")[-1].startswith(str(self.root))]

    def clean_up(self) -> None:
        """What a trial left is removed so the next starts clean (after the invariants were checked)."""
        for job in self.slurm_jobs():
            subprocess.run(["scancel", job.split("|")[0]], env={**os.environ, "SLURM_CONF": self.slurm_conf or ""},
                           capture_output=True, timeout=30)
        for endpoint in (self.home / "endpoints").glob("*/endpoint.json"):
            self.mltrain("endpoints", "delete", endpoint.parent.name, timeout=60)
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.disk is not None:
            subprocess.run(["umount", "-l", str(self.disk)], capture_output=True, timeout=30)


def _text(b: object) -> str:
    if isinstance(b, bytes):
        return b.decode(errors="replace")
    return b if isinstance(b, str) else ""
