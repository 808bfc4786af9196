"""The mpirun line and its supervision (Azure ML's MpiConfiguration, horovodrun's flags).

mpirun's own output is the launcher's log (the seeds' 70_mpi_log); each rank writes its own
logs/rank_<N>.log through mltrain.backends.mpi.rank. When a rank exits non-zero, mpirun ends the others and
exits non-zero; the ranks' reports name the rank that failed first.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Dict, List, Tuple, Union

from mltrain.backends.base import Outcome
from mltrain.backends.handover import cancel_reason
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED
from mltrain.ranks import contract, reports
from mltrain.ranks.process import POLL_S, copy_output, stop_groups
from mltrain.runs.console import Console, RunLog
from mltrain.runs.record import RunRecord

#: What every rank needs from the driver, exported with -x so that remote ranks get it too.
EXPORTED = ("MASTER_ADDR", "MASTER_PORT", "MLTRAIN_RUN_DIR", "PYTHONUNBUFFERED", "PATH", "PYTHONPATH",
            "LD_LIBRARY_PATH", "OMP_NUM_THREADS")


def mpirun_command(job: FrozenJob, master_port: Union[int, str]) -> Tuple[List[str], Dict[str, str]]:
    """(argv, environment additions) of the mpirun that starts the whole job."""
    dist = job.distribution
    env = dict(job.env)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), MLTRAIN_RUN_DIR=job.run_dir,
               PYTHONUNBUFFERED="1")
    env.update(contract.thread_env(job, os.environ, os.cpu_count() or 1))
    argv = ["mpirun", "-np", str(job.world_size),
            # horovodrun's placement: ranks fill the slots in order, unbound (torch sets its own threads)
            "--bind-to", "none", "--map-by", "slot",
            # one machine: keep Open MPI's traffic on loopback
            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if dist.oversubscribe:
        argv.append("--oversubscribe")
    for name in sorted(set(EXPORTED) | set(job.env)):
        if name in env or name in os.environ:
            argv += ["-x", name]
    if dist.horovod and not _yield_set(job, [str(a) for a in dist.mpirun_args]):
        # Horovod's background thread waits in MPI calls, and Open MPI busy-polls while it waits, taking
        # a core from the ranks' own work whenever there are as many ranks as cores (it yields only when
        # it sees more ranks than slots). Yielding: Horovod/DDP 0.67 -> 1.46 on 2 CPU cores, 2 ranks
        # (benchmarks/bench_horovod.py --polling-arm). Set OMPI_MCA_mpi_yield_when_idle=0 to keep polling.
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    argv += [str(a) for a in dist.mpirun_args]
    argv += [sys.executable, "-m", "mltrain.backends.mpi.rank"]
    return argv, env


def _yield_set(job: FrozenJob, mpirun_args: List[str]) -> bool:
    """Whether the user already chose Open MPI's mpi_yield_when_idle (environment or mpirun flags)."""
    key = "OMPI_MCA_mpi_yield_when_idle"
    return key in os.environ or key in job.env or "mpi_yield_when_idle" in mpirun_args


class MpiSupervisor:
    def __init__(self, argv: List[str], env: Dict[str, str], job: FrozenJob, record: RunRecord, log: RunLog,
                 console: Console, cancel: threading.Event):
        self.argv, self.env, self.job, self.record, self.log = argv, env, job, record, log
        self.console, self.cancel = console, cancel

    def run(self) -> Outcome:
        self.log.info("mpirun: " + " ".join(self.argv))
        proc = subprocess.Popen(self.argv, cwd=self.job.cwd, env={**os.environ, **self.env}, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        launcher_log = self.record.log_path()
        # mpirun's own output carries what each rank shows (mltrain.backends.mpi.rank decides)
        # (every shown rank's lines, whole, when several are shown: held here until each line's end)
        shared = self.job.console == "all" and self.job.world_size > 1
        on_chunk, on_line = (self.console.rank_output(0, whole_lines=shared) if self.job.console != "none"
                             else (None, None))
        pump = threading.Thread(target=copy_output, args=(proc.stdout, launcher_log),
                                kwargs={"on_chunk": on_chunk, "on_line": on_line}, daemon=True)
        pump.start()
        try:
            while proc.poll() is None:
                if self.cancel.is_set():
                    stop_groups([proc], self.job.kill_grace_s)
                    return Outcome(CANCELED, error=cancel_reason(self.cancel))
                time.sleep(POLL_S)
        finally:
            stop_groups([proc], self.job.kill_grace_s)
            pump.join(timeout=5)
        code = proc.returncode
        failed_rank, error = reports.failure(self.record)
        if code == 0 and failed_rank is None:
            return Outcome(COMPLETED)
        return Outcome(FAILED, error=error or f"mpirun exited with code {code} (see {launcher_log})",
                       failed_rank=failed_rank)
