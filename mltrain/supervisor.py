"""Local fan-out: start every rank as a child process on this machine and supervise it.

- each rank is its own process group, so stopping a rank also stops what it started (a `command`
  job's children, data-loader workers), and a Ctrl-C at the terminal reaches only the driver, which
  then stops the ranks in order;
- a rank that exits non-zero ends the run within one poll interval: the others get SIGTERM, then
  SIGKILL after the grace period (pytorch elastic #134: no rank is left hanging);
- rank output goes line by line to logs/rank_<N>.log and, per run.console, to the terminal.
"""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from mltrain import rankenv
from mltrain.console import Console, RunLog
from mltrain.frozen import FrozenJob
from mltrain.ports import claim_port
from mltrain.records import CANCELED, COMPLETED, FAILED, RunRecord

POLL_S = 0.05
TAIL_LINES = 15


@dataclass
class Outcome:
    status: str
    exit_codes: Dict[int, Optional[int]] = field(default_factory=dict)
    error: Optional[str] = None
    failed_rank: Optional[int] = None


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def tail(path, lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def follow(path, offset: int) -> tuple:
    """(what was appended to a log since `offset`, the new offset): a reader streaming a rank's log."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return b"", offset
    return chunk, offset + len(chunk)


class _Rank:
    def __init__(self, place: rankenv.RankPlace, proc: subprocess.Popen, log_path) -> None:
        self.place = place
        self.proc = proc
        self.log_path = log_path
        self.reader: Optional[threading.Thread] = None
        self.terminated = False

    @property
    def rank(self) -> int:
        return self.place.rank


class LocalSupervisor:
    def __init__(self, job: FrozenJob, record: RunRecord, log: RunLog, console: Console, cancel: threading.Event):
        self.job, self.record, self.log, self.console, self.cancel = job, record, log, console, cancel
        self.ranks: List[_Rank] = []

    # ------------------------------------------------------------------------- starting
    def _spawn(self, spec: dict) -> _Rank:
        log_path = self.record.log_path(spec["rank"])
        proc = subprocess.Popen(
            spec["argv"],
            cwd=spec["cwd"],
            env={**os.environ, **spec["env"]},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        rank = _Rank(spec["place"], proc, log_path)
        rank.reader = threading.Thread(target=self._pump, args=(rank,), daemon=True)
        rank.reader.start()
        return rank

    def _pump(self, rank: _Rank) -> None:
        show = self.job.console == "all" or (self.job.console == "rank0" and rank.rank == 0)
        bare = rank.rank == 0
        assert rank.proc.stdout is not None
        copy_output(
            rank.proc.stdout, rank.log_path,
            on_chunk=self.console.raw if show and bare else None,
            on_line=(lambda line: self.console.rank_line(rank.rank, line)) if show and not bare else None,
        )

    # ------------------------------------------------------------------------- supervising
    def run(self) -> Outcome:
        with claim_port() as port:
            # rank 0 may draw a progress bar when the driver's output is a terminal
            tty = {"MLTRAIN_TTY": "1"} if self.job.console != "none" and self.console.is_terminal() else None
            specs = rankenv.plan(self.job, "127.0.0.1", port.port, os.cpu_count() or 1, tty)
            self.record.update(world={**self.record.data["world"], "master_addr": "127.0.0.1",
                                      "master_port": port.port})
            try:
                for spec in specs:
                    self.log.info(f"rank {spec['rank']}: {' '.join(spec['argv'])} (cwd {spec['cwd']})")
                    self.ranks.append(self._spawn(spec))
                    self.record.set_rank(spec["rank"], pid=self.ranks[-1].proc.pid, host="localhost")
                return self._watch()
            finally:
                self._stop_all()
                for r in self.ranks:
                    if r.reader is not None:
                        r.reader.join(timeout=5)
                self._record_exits()

    def _watch(self) -> Outcome:
        while True:
            if self.cancel.is_set():
                self.log.info("cancel requested: stopping every rank")
                return Outcome(CANCELED, error="canceled by the user")
            running = False
            for r in self.ranks:
                code = r.proc.poll()
                if code is None:
                    running = True
                elif code != 0:
                    return self._failed(r, code)
            if not running:
                return Outcome(COMPLETED)
            time.sleep(POLL_S)

    def _failed(self, r: _Rank, code: int) -> Outcome:
        self._stop_all()
        if r.reader is not None:
            r.reader.join(timeout=5)
        log_tail = tail(r.log_path)
        message = f"rank {r.rank} {describe_exit(code)}"
        detail = f"{message}; last lines of {r.log_path}:\n{log_tail}" if log_tail else message
        self.log.info(detail)
        return Outcome(FAILED, error=detail, failed_rank=r.rank)

    def _stop_all(self) -> None:
        alive = [r for r in self.ranks if r.proc.poll() is None]
        if not alive:
            return
        for r in alive:
            r.terminated = True
            _signal_group(r.proc, signal.SIGTERM)
        deadline = time.monotonic() + self.job.kill_grace_s
        while time.monotonic() < deadline and any(r.proc.poll() is None for r in alive):
            time.sleep(POLL_S)
        for r in alive:
            if r.proc.poll() is None:
                self.log.info(f"rank {r.rank} ignored SIGTERM for {self.job.kill_grace_s}s: SIGKILL")
            # The group may hold children that outlived the rank itself.
            _signal_group(r.proc, signal.SIGKILL)
        for r in alive:
            r.proc.wait()

    def _record_exits(self) -> None:
        for r in self.ranks:
            self.record.set_rank(r.rank, exit_code=r.proc.returncode, stopped_by_mltrain=r.terminated)


def copy_output(stream, log_path, on_chunk=None, on_line=None) -> None:
    """Copy a rank's output to its log as it comes, and hand it on in chunks or in whole lines.

    Chunks pass partial lines and '\r' redraws through (a live progress bar); the log keeps only
    what each line ends as (no bar frames, no terminal escapes).
    """
    fd = stream.fileno()
    pending = b""
    with open(log_path, "ab", buffering=0) as log:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if on_chunk is not None:
                on_chunk(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                log.write(_final_frame(line) + b"\n")
                if on_line is not None:
                    on_line(line.decode("utf-8", "replace"))
        if pending:
            log.write(_final_frame(pending) + b"\n")
            if on_line is not None:
                on_line(pending.decode("utf-8", "replace"))
    stream.close()


def run_program(argv: List[str], cwd: str, env: dict, log_path, on_start=None, on_chunk=None, on_line=None) -> int:
    """Run one rank's program as a child of a rank wrapper (a Slurm task, an mpirun rank), its output
    copied to log_path and handed on; returns its exit code. on_start gets the process (signals)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    if on_start is not None:
        on_start(proc)
    pump = threading.Thread(target=copy_output, args=(proc.stdout, log_path),
                            kwargs={"on_chunk": on_chunk, "on_line": on_line}, daemon=True)
    pump.start()
    code = proc.wait()
    pump.join(timeout=10)
    return code


def _final_frame(line: bytes) -> bytes:
    return line.rsplit(b"\r", 1)[-1].replace(b"\x1b[K", b"")


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
