"""What submitit runs in each Slurm task: one mltrain rank.

The task reads the frozen job from the run directory (never the live config), fills in the rank
contract from Slurm's view of the allocation (submitit's JobEnvironment), runs the rank program as
a child process and tees its output into the run's logs/rank_<N>.log. A non-zero exit raises, so
submitit's task exits non-zero and `srun --kill-on-bad-exit` ends the whole step: the job is FAILED.

Preemption/timeout: Slurm sends USR2 to every task; each task passes it on to its rank program as
SIGUSR1 and touches $MLTRAIN_RUN_DIR/checkpoint_requested, and submitit (rank 0) requeues the job
through `checkpoint()`. The requeued job runs the same run directory and frozen config again;
MLTRAIN_ATTEMPT tells the program which attempt it is.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Union

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import RunFailed
from mltrain.jobspec.job import HYDRA_TASK_MODULE, FrozenJob
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.ranks import contract, hangs, reports, system_metrics
from mltrain.ranks.process import describe_exit, run_forked, run_program
from mltrain.runs.console import Console
from mltrain.runs.waiting import wait_until

if TYPE_CHECKING:
    from submitit.helpers import DelayedSubmission

    from mltrain.ranks.process import ForkedChild

    #: The rank program's process: a program of its own, or a fork of this one (a plain Hydra app's task).
    _Child = Union[subprocess.Popen[bytes], ForkedChild]

#: What signal.getsignal gives back: a Python handler, or SIG_DFL / SIG_IGN (or None: not set from Python).
_Handler = Union[Callable[[int, Optional[FrameType]], object], int, signal.Handlers, None]

#: MASTER_PORT is derived from the job id into 20000-29999: below the kernel's ephemeral range (Linux's
#: default starts at 32768), where an outgoing connection could hold it, and below the ports endpoints are
#: drawn from (endpoints/endpoint_port.py, 30000 up), so a job never takes a stopped endpoint's port.
PORT_BASE, PORT_SPAN = 20000, 10000
RENDEZVOUS_WAIT_S = 300
CHECKPOINT_FILE = "checkpoint_requested"
#: How long a checkpoint waits for the program to end after its SIGUSR1 before stopping it (SIGTERM).
CHECKPOINT_WAIT_S = 10.0


def _requeue(job_id: str) -> bool:
    """The job back in Slurm's queue (its tasks stopped), to run again as a requeued job does."""
    try:
        return subprocess.run(["scontrol", "requeue", job_id], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def derived_port(job_id: str) -> int:
    """Stable across requeues (same job id); different for concurrent jobs on the same nodes."""
    digits = "".join(c for c in job_id if c.isdigit()) or "0"
    return PORT_BASE + int(digits) % PORT_SPAN


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def rendezvous(run_dir: Path, job_id: str, attempt: int, rank: int, master: str) -> int:
    """Rank 0 picks the port (the derived one, or the next free one on collision) and publishes it
    in the run directory; the other ranks read it there."""
    path = run_dir / "ranks" / f"rendezvous_{job_id}_{attempt}.json"
    if rank == 0:
        derived = derived_port(job_id)
        for step in range(100):  # the next ports up, wrapping within the span (never into endpoints' ports)
            port = PORT_BASE + (derived - PORT_BASE + step) % PORT_SPAN
            if _bindable(port):
                break
        atomic_write(path, json.dumps({"master_addr": master, "master_port": port}))
        return port
    deadline = time.monotonic() + RENDEZVOUS_WAIT_S
    while time.monotonic() < deadline:
        if path.is_file():
            return int(json.loads(path.read_text())["master_port"])
        time.sleep(0.02)
    raise RuntimeError(f"rank {rank}: rank 0 published no rendezvous in {RENDEZVOUS_WAIT_S}s ({path})")


def tf_workers(run_dir: Path, job_id: str, attempt: int, rank: int, world: int, host: str) -> List[str]:
    """TF_CONFIG's workers (distribution.tf_config): each rank takes a free port on its own node and
    publishes host:port in the run directory, then reads every rank's. Its port stays bound until all
    have published, so two ranks on one node are never handed the same one."""
    def path(r: int) -> Path:
        return run_dir / "ranks" / f"tf_worker_{job_id}_{attempt}_{r}.json"

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        atomic_write(path(rank), json.dumps({"worker": f"{host}:{s.getsockname()[1]}"}))
        deadline = time.monotonic() + RENDEZVOUS_WAIT_S
        while not all(path(r).is_file() for r in range(world)):
            if time.monotonic() > deadline:
                raise RuntimeError(f"rank {rank}: not every rank published its TF_CONFIG worker in "
                                   f"{RENDEZVOUS_WAIT_S}s ({run_dir / 'ranks'})")
            time.sleep(0.02)
    return [str(json.loads(path(r).read_text())["worker"]) for r in range(world)]


def _is_hydra_task(argv: List[str]) -> bool:
    """Whether the rank program is a plain Hydra app's task run by this same interpreter."""

    return (len(argv) == 3 and argv[1:] == ["-m", HYDRA_TASK_MODULE]
            and os.path.realpath(argv[0]) == os.path.realpath(sys.executable))


class SlurmRank:
    """Picklable callable; submitit runs one per task and calls checkpoint() on preemption."""

    def __init__(self, run_dir: str, own_session: bool = False, env: Optional[Dict[str, str]] = None) -> None:
        self.run_dir = run_dir
        # the program in a process group of its own, which a packed member's cancel stops whole
        self.own_session = own_session
        # set for the program over Slurm's (a packed worker's GPU slot: its share of the worker's devices)
        self.env = env or {}
        self._proc: Optional[_Child] = None
        self._not_requeued: Optional[Exception] = None
        self._stopped = False  # a stop signal came while the program ran (see _stop_signal)

    def __getstate__(self) -> Dict[str, str]:
        return {"run_dir": self.run_dir}

    def __setstate__(self, state: Dict[str, str]) -> None:
        self.run_dir, self._proc, self.own_session, self.env = state["run_dir"], None, False, {}
        self._not_requeued = None
        self._stopped = False

    def __call__(self) -> int:
        import submitit  # heavy

        env = submitit.JobEnvironment()
        run_dir = Path(self.run_dir)
        job = FrozenJob.load(run_dir)
        attempt = int(os.environ.get("SLURM_RESTART_COUNT", "0"))
        compute = compute_as(job.compute, SlurmComputeConf)
        # a lost node's replacement is a requeue too (mltrain.backends.slurm.node_loss), counted apart
        max_requeues = compute.max_requeues + compute.max_node_failures
        place = contract.RankPlace(env.global_rank, env.local_rank, env.node)
        (run_dir / "ranks").mkdir(exist_ok=True)
        if attempt > max_requeues:
            self._write_rank(place.rank, attempt, exit_code=None, error=f"requeued {attempt} times (compute.max_requeues={max_requeues})")
            raise RunFailed(f"run requeued {attempt} times, more than compute.max_requeues={max_requeues}")
        master = env.hostnames[0]
        port = rendezvous(run_dir, str(env.job_id), attempt, place.rank, master)
        workers = None
        if job.distribution.tf_config:
            workers = tf_workers(run_dir, str(env.job_id), attempt, place.rank, job.world_size, env.hostnames[env.node])
        rank_env = contract.rank_env(job, place, master, port, workers)
        rank_env.update(contract.thread_env(job, os.environ, len(os.sched_getaffinity(0))))
        rank_env.update(MLTRAIN_ATTEMPT=str(attempt), MLTRAIN_SLURM_JOB_ID=str(env.job_id))
        full = {**os.environ, **rank_env, **self.env}
        argv = contract.rank_argv(job, full)
        log_path = run_dir / "logs" / f"rank_{place.rank}.log"
        if attempt:
            with open(log_path, "ab") as f:
                f.write(f"--- attempt {attempt} (requeued) on {socket.gethostname()} ---\n".encode())
        # exit_code/ended of an earlier attempt are cleared: the driver reads them as this attempt's end. devices:
        # what the program sees, as Slurm set it for this task (--gpus-per-task, --gpu-bind), not what was asked
        self._write_rank(place.rank, attempt, host=socket.gethostname(), started=time.time(), exit_code=None,
                         ended=None, stopped_by_signal=None, devices=full.get("CUDA_VISIBLE_DEVICES"))
        # Slurm sends the USR2 of `--signal` (and `scancel --signal`) to every process of the step, the
        # rank program too, whose default action for it is to die. The program is started with USR2
        # ignored (an ignored signal stays ignored through fork and exec) and gets the documented
        # SIGUSR1 + checkpoint_requested from this wrapper instead, which handles USR2 once it has started.
        # A packed worker's GPU slot runs this in a thread of its own, where no handler can be set: there the
        # thread blocks USR2 (the mask goes through fork and exec too) and the worker's main thread passes
        # the signal on (mltrain.backends.slurm.pack_slots).
        own_signals = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGUSR2)
        previous_term = signal.getsignal(signal.SIGTERM)
        if own_signals:
            signal.signal(signal.SIGUSR2, signal.SIG_IGN)
            # Slurm's stop (scancel, a time limit) is a SIGTERM to every process of the step; noted here, so an
            # exit 0 after it (a program that saves and exits on SIGTERM) is not taken for a run that ended by itself
            signal.signal(signal.SIGTERM, lambda s, f: self._stop_signal(s, f, previous_term))

        def alive() -> Optional[int]:
            return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

        sampler = system_metrics.one_rank(run_dir / "metrics.jsonl", job.system_metrics_s, place.rank,
                                          place.local_rank, alive)
        requeue = (lambda: _requeue(str(env.job_id))) if job.hang_action == "requeue" else None
        watch = hangs.RankWatch(run_dir, job.hang_timeout_s, place.rank, job.world_size, socket.gethostname(),
                                attempt, alive, self._stop_program, requeue)

        def started(proc: _Child) -> None:
            self._proc = proc
            if own_signals:
                signal.signal(signal.SIGUSR2, lambda s, f: self._checkpoint_signal(s, f, previous))
            sampler.start()
            watch.start()


        # every task's own output also goes to submitit's per-task log
        keep = {"on_start": started, "on_chunk": Console().raw}
        if _is_hydra_task(argv):
            # A plain Hydra app's task: Hydra is imported here once and the task runs in a fork of this
            # process, as hydra-submitit-launcher runs it in submitit's own, instead of paying for a
            # second interpreter that imports it all again. It keeps its own process, log and exit code.
            from mltrain.ranks import hydra_app_rank  # startup

            # prepare() is not annotated yet: mltrain.ranks is outside the strictly typed packages
            code = run_forked(hydra_app_rank.prepare(), job.cwd, full, log_path, new_session=self.own_session,  # type: ignore[no-untyped-call]
                              **keep)
        else:
            code = run_program(argv, job.cwd, full, log_path, new_session=self.own_session, **keep)
        sampler.stop()
        watch.stop()
        if own_signals:
            signal.signal(signal.SIGTERM, previous_term)
        if self._stopped:
            self._write_rank(place.rank, attempt, stopped_by_signal=True)
        if watch.requeued:  # Slurm stops this attempt's tasks and runs the job again (run.hang_action=requeue)
            self._write_rank(place.rank, attempt, exit_code=code, ended=time.time())
            return code
        if watch.message is not None:  # rank 0 found the run hung and stopped its program: the job ends with why
            self._write_rank(place.rank, attempt, exit_code=code, ended=time.time(), error=watch.message)
            raise RunFailed(watch.message)
        if self._not_requeued is not None:  # the time limit or a preemption ended this attempt (_checkpoint_signal)
            raise self._not_requeued
        self._write_rank(place.rank, attempt, exit_code=code, ended=time.time())
        if code != 0:
            raise RunFailed(f"rank {place.rank} {describe_exit(code)}")
        return code

    def _stop_program(self) -> None:
        """The rank program, stopped for a hang (its group: what it started too), SIGKILL if SIGTERM is ignored."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)

    def _write_rank(self, rank: int, attempt: int, **fields: object) -> None:
        reports.write(self.run_dir, rank, attempt=attempt, **fields)

    @property
    def program(self) -> Optional[_Child]:
        """The rank program's process once started (a packed member's cancel stops its group)."""
        return self._proc

    def pass_checkpoint_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        """Slurm's checkpoint signal, passed on by a packed worker: SIGUSR1 to the program and its checkpoint file,
        as an unpacked rank's own handler does."""
        self._checkpoint_signal(signum, frame, None)

    def _checkpoint_signal(self, signum: int, frame: Optional[FrameType], previous: _Handler) -> None:
        Path(self.run_dir, CHECKPOINT_FILE).touch()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGUSR1)
        if callable(previous):
            try:
                previous(signum, frame)  # submitit: rank 0 checkpoints and requeues (and exits), or raises why not
            except Exception as exc:  # noqa: BLE001 - raised again once the program has ended (__call__)
                # submitit ends a job it will not requeue (out of requeues) by raising UncompletedJobError from its
                # handler, to reach process_job's error result. Raised from a signal handler, it lands wherever the
                # main thread is, and Slurm sends SIGCONT with the USR2: when submitit's handler of SIGCONT was
                # logging at that moment, logging's handleError swallowed the error, the program's exit 0 followed,
                # and a run that had timed out ended Completed (CI of 2026-11-27). Kept, and raised by __call__.
                self._not_requeued = exc

    def _stop_signal(self, signum: int, frame: Optional[FrameType], previous: _Handler) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._stopped = True
        if callable(previous):
            previous(signum, frame)  # submitit's: it logs the signal and lets the job end as Slurm ends it
        elif previous != signal.SIG_IGN:  # the default action: end this process as the signal would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def checkpoint(self, *args: object, **kwargs: object) -> DelayedSubmission:
        """Called by submitit on rank 0 before it requeues: the rank program had its signal; give it
        a moment to save, then run the same callable again."""
        import submitit  # heavy

        self.await_program(CHECKPOINT_WAIT_S)
        return submitit.helpers.DelayedSubmission(SlurmRank(self.run_dir))

    def await_program(self, timeout_s: float) -> None:
        """Until the signalled rank program has ended, or closed its output, and its last lines are in its log
        (at most `timeout_s`; then it is terminated): submitit ends this process right after a checkpoint."""
        proc = self._proc
        if proc is None:
            return
        pump = getattr(proc, "pump", None)
        # The program's end, or the end of its output: this runs in a signal handler, mostly while another
        # thread waits in the program's Popen.wait() (the main thread, or a packed worker's slot), whose lock it
        # holds, so that a wait(timeout) here could only time out (10 s of every checkpoint in submitit's logs)
        # and poll() says nothing until then.
        if not wait_until(lambda: proc.poll() is not None or (pump is not None and not pump.is_alive()),
                          timeout_s, poll=0.02):
            proc.terminate()
        if pump is not None:
            pump.join(timeout=5)
