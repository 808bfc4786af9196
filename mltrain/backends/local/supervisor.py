"""Local fan-out: start every rank as a child process on this machine and supervise it.

- each rank is its own process group, so stopping a rank also stops what it started (a `command`
  job's children, data-loader workers), and a Ctrl-C at the terminal reaches only the driver, which
  then stops the ranks in order;
- a rank that exits non-zero ends the run within one poll interval: the others get SIGTERM, then
  SIGKILL after the grace period (pytorch elastic #134: no rank is left hanging);
- rank output goes line by line to logs/rank_<N>.log and, per run.console, to the terminal.
"""
from __future__ import annotations

import dataclasses
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mltrain.backends.base import Outcome, Plan, bind
from mltrain.backends.handover import cancel_reason
from mltrain.backends.local import guard as guard_mod
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED
from mltrain.ranks import hangs
from mltrain.ranks.contract import RankPlace, tf_config
from mltrain.ranks.process import POLL_S, LogCopy, copy_output, describe_exit, stop_groups, tail
from mltrain.ranks.system_metrics import SystemSampler
from mltrain.runs.console import Console, RunLog
from mltrain.runs.record import RunRecord

#: How often a run's progress is looked at for a hang (a few stats of its folder).
HANG_LOOK_S = 1.0


class _Rank:
    def __init__(self, place: RankPlace, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.place = place
        self.proc = proc
        self.log_path = log_path
        self.reader: Optional[threading.Thread] = None
        self.terminated = False
        self.copy = LogCopy()

    @property
    def rank(self) -> int:
        return self.place.rank


class LocalSupervisor:
    def __init__(self, plan: Plan, record: RunRecord, log: RunLog, console: Console, cancel: threading.Event,
                 devices: Optional[List[List[str]]] = None, held_fds: Sequence[int] = ()):
        """`devices`: each rank's GPUs from the machine's pool (None: the ranks get no CUDA_VISIBLE_DEVICES
        of ours); `held_fds`: the pool's locks on them, handed to the guard (mltrain.backends.local.gpus)."""
        self.plan, self.job, self.record, self.log = plan, plan.job, record, log
        self.console, self.cancel = console, cancel
        self.devices, self.held_fds = devices, tuple(held_fds)
        self.ranks: List[_Rank] = []

    def run(self, port: int, workers: Sequence[str] = ()) -> Outcome:
        """The ranks with MASTER_PORT `port`; `workers`: each rank's host:port in TF_CONFIG (tf_config)."""
        # rank 0 may draw a progress bar when the driver's output is a terminal
        tty = {"MLTRAIN_TTY": "1"} if self.job.console != "none" and self.console.is_terminal() else {}
        self.record.update(world=dataclasses.replace(self.record.doc.world, master_addr="127.0.0.1", master_port=port))
        token = secrets.token_hex(8)
        guard = self._start_guard(token)
        sampler = SystemSampler(self.record.dir / "metrics.jsonl", self.job.system_metrics_s, self._pids,
                                dict(enumerate(self.devices or [])))
        try:
            for spec in bind(self.plan.ranks, port):
                if workers:
                    spec["env"]["TF_CONFIG"] = tf_config(workers, spec["rank"])
                if self.devices is not None:
                    spec["env"]["CUDA_VISIBLE_DEVICES"] = ",".join(self.devices[spec["rank"]])
                self.log.info(f"rank {spec['rank']}: {' '.join(spec['argv'])} (cwd {spec['cwd']})")
                self.ranks.append(self._spawn({**spec, "env": {**spec["env"], **tty, guard_mod.MARK: token}}, guard))
                seen = {**os.environ, **spec["env"]}.get("CUDA_VISIBLE_DEVICES")
                self.record.set_rank(spec["rank"], pid=self.ranks[-1].proc.pid, host=socket.gethostname(), devices=seen)
            sampler.start()
            outcome = self._watch()
        finally:
            sampler.stop()
            self._stop_all()
            self._tell(guard, "done")
            self._end_guard(guard)
            for r in self.ranks:
                if r.reader is not None:
                    r.reader.join(timeout=5)
            for r in self.ranks:
                self.record.set_rank(r.rank, exit_code=r.proc.returncode, stopped_by_mltrain=r.terminated)
        return self._settled(outcome)

    def _settled(self, outcome: Outcome) -> Outcome:
        """A cancel that came as the ranks ended by themselves, each with exit code 0, stopped nothing: the run
        completed its work, and is Completed (recorded Canceled, `runs resume` ran it again: the campaign's seed
        149, a sweep's member whose SIGTERM came as it ended)."""
        if outcome.status == CANCELED and self.ranks and all(r.proc.returncode == 0 and not r.terminated
                                                             for r in self.ranks):
            self.log.info("every rank had ended by itself with exit code 0 before the cancel reached it")
            return Outcome(COMPLETED)
        return outcome

    def _pids(self) -> Dict[int, int]:
        """The ranks still running, by rank: what the system metrics sample."""
        return {r.rank: r.proc.pid for r in self.ranks if r.proc.poll() is None}

    def _start_guard(self, token: str) -> Optional[subprocess.Popen[bytes]]:
        """The process that stops the ranks if this driver dies first (mltrain.backends.local.guard).
        Its own session, so a signal to the driver's process group does not take it too."""
        try:
            return subprocess.Popen([sys.executable, "-I", "-S", guard_mod.__file__, str(self.job.kill_grace_s), token],
                                    stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True,
                                    # the run's GPUs stay held until the guard has stopped the ranks
                                    pass_fds=self.held_fds,
                                    # a driver started inside another run's rank holds that run's mark: its guard
                                    # must not, or the outer guard would stop it before it stops its own ranks
                                    env=guard_mod.unmarked(dict(os.environ)))
        except OSError as exc:  # the run still runs; only a killed driver would leave its ranks behind
            self.log.info(f"warning: no guard for the ranks ({exc}); a driver killed now would leave them running")
            return None

    @staticmethod
    def _tell(guard: Optional[subprocess.Popen[bytes]], word: str) -> None:
        if guard is None or guard.stdin is None:
            return
        try:
            guard.stdin.write(word.encode() + b"\n")
            guard.stdin.flush()
        except OSError:  # the guard is gone: nothing to tell it
            pass

    @staticmethod
    def _end_guard(guard: Optional[subprocess.Popen[bytes]]) -> None:
        if guard is None:
            return
        if guard.stdin is not None:
            try:
                guard.stdin.close()
            except OSError:
                pass
        try:
            guard.wait(timeout=5)
        except subprocess.TimeoutExpired:
            guard.kill()
            guard.wait()

    def _spawn(self, spec: Dict[str, Any], guard: Optional[subprocess.Popen[bytes]]) -> _Rank:
        proc = subprocess.Popen(spec["argv"], cwd=spec["cwd"], env={**os.environ, **spec["env"]},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        self._tell(guard, str(proc.pid))  # at once; the rank leads its own group: pgid == pid
        rank = _Rank(spec["place"], proc, self.record.log_path(spec["rank"]))
        rank.reader = threading.Thread(target=self._pump, args=(rank,), daemon=True)
        rank.reader.start()
        return rank

    def _pump(self, rank: _Rank) -> None:
        show = self.job.console == "all" or (self.job.console == "rank0" and rank.rank == 0)
        # rank 0 passes through as written only when no other rank's lines share the console
        shared = self.job.console == "all" and self.job.world_size > 1
        on_chunk, on_line = self.console.rank_output(rank.rank, whole_lines=shared) if show else (None, None)
        assert rank.proc.stdout is not None
        copy_output(rank.proc.stdout, rank.log_path, on_chunk=on_chunk, on_line=on_line, copy=rank.copy)

    def _watch(self) -> Outcome:
        progress = hangs.Progress(self.record.dir, self.job.hang_timeout_s)
        next_look = time.monotonic() + HANG_LOOK_S
        while True:
            if self.cancel.is_set():
                self.log.info("cancel requested: stopping every rank")
                return Outcome(CANCELED, error=cancel_reason(self.cancel))
            running = False
            for r in self.ranks:
                code = r.proc.poll()
                if code is None:
                    running = True
                elif code != 0:
                    return self._failed(r, code)
            if not running:
                return Outcome(COMPLETED)
            if progress.timeout_s and time.monotonic() >= next_look:
                next_look = time.monotonic() + HANG_LOOK_S
                if progress.hung():
                    return self._hung(progress)
            time.sleep(POLL_S)

    def _hung(self, progress: hangs.Progress) -> Outcome:
        """No rank has made progress for hang_timeout_s: take every rank's stack, then end the run Failed."""
        self.log.info(f"no progress from any rank for {progress.stalled_s():.0f} s (run.hang_timeout_min): "
                      "taking every rank's stack", show=True)
        running = {r.rank: r.proc.pid for r in self.ranks if r.proc.poll() is None}
        host = socket.gethostname()
        stacks = hangs.take_stacks(running, {r: host for r in running})
        path = self.record.dir / "logs" / hangs.STACKS_FILE
        hangs.write_stacks(stacks, path)
        minutes = self.job.hang_timeout_s / 60
        detail = f"hung: no progress for {minutes:g} min; {hangs.summary(stacks)}; stacks in {path}"
        self.log.info(detail)
        return Outcome(FAILED, error=detail)

    def _failed(self, r: _Rank, code: int) -> Outcome:
        self._stop_all()
        if r.reader is not None:
            r.reader.join(timeout=5)
        problem = r.copy.problem()
        log_tail = r.copy.tail() if problem else tail(r.log_path)
        message = f"rank {r.rank} {describe_exit(code)}" + (f"; {problem}" if problem else "")
        where = "its output" if problem else r.log_path
        detail = f"{message}; last lines of {where}:\n{log_tail}" if log_tail else message
        self.log.info(detail)
        return Outcome(FAILED, error=detail, failed_rank=r.rank)

    def _stop_all(self) -> None:
        by_proc = {id(r.proc): r for r in self.ranks}

        def killed(proc: subprocess.Popen[bytes]) -> None:
            self.log.info(f"rank {by_proc[id(proc)].rank} ignored SIGTERM for {self.job.kill_grace_s}s: SIGKILL")

        for proc in stop_groups([r.proc for r in self.ranks], self.job.kill_grace_s, on_kill=killed):
            by_proc[id(proc)].terminated = True
