"""Local MPI fan-out: one `mpirun` starts every rank (Azure ML's MpiConfiguration, horovodrun's flags).

mpirun's own output is the launcher's log (the seeds' 70_mpi_log); each rank writes its own
logs/rank_<N>.log through mltrain.mpi_rank. When a rank exits non-zero, mpirun ends the others and
exits non-zero; the ranks' reports name the rank that failed first.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Tuple

from mltrain import rankenv, rankreports
from mltrain.console import Console, RunLog
from mltrain.frozen import FrozenJob
from mltrain.ports import claim_port
from mltrain.records import CANCELED, COMPLETED, FAILED, RunRecord
from mltrain.supervisor import POLL_S, Outcome, copy_output

#: What every rank needs from the driver, exported with -x so that remote ranks get it too.
EXPORTED = ("MASTER_ADDR", "MASTER_PORT", "MLTRAIN_RUN_DIR", "PYTHONUNBUFFERED", "PATH", "PYTHONPATH",
            "LD_LIBRARY_PATH", "OMP_NUM_THREADS")


def mpirun_command(job: FrozenJob, master_port: int) -> Tuple[List[str], Dict[str, str]]:
    """(argv, environment additions) of the mpirun that starts the whole job."""
    dist = job.config.get("distribution", {})
    env = dict(job.env)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), MLTRAIN_RUN_DIR=job.run_dir,
               PYTHONUNBUFFERED="1")
    env.update(rankenv.thread_env(job, os.environ, os.cpu_count() or 1))
    argv = ["mpirun", "-np", str(job.world_size),
            # horovodrun's placement: ranks fill the slots in order, unbound (torch sets its own threads)
            "--bind-to", "none", "--map-by", "slot",
            # one machine: keep Open MPI's traffic on loopback
            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    if os.geteuid() == 0:
        argv.append("--allow-run-as-root")
    if dist.get("oversubscribe"):
        argv.append("--oversubscribe")
    for name in sorted(set(EXPORTED) | set(job.env)):
        if name in env or name in os.environ:
            argv += ["-x", name]
    argv += [str(a) for a in dist.get("mpirun_args") or []]
    argv += [sys.executable, "-m", "mltrain.mpi_rank"]
    return argv, env


class MpiSupervisor:
    def __init__(self, job: FrozenJob, record: RunRecord, log: RunLog, console: Console, cancel: threading.Event):
        self.job, self.record, self.log, self.console, self.cancel = job, record, log, console, cancel

    def run(self) -> Outcome:
        with claim_port() as port:
            argv, env = mpirun_command(self.job, port.port)
            self.record.update(world={**self.record.data["world"], "master_addr": "127.0.0.1",
                                      "master_port": port.port}, mpirun=argv)
            self.log.info("mpirun: " + " ".join(argv))
            proc = subprocess.Popen(argv, cwd=self.job.cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            launcher_log = self.record.log_path()
            pump = threading.Thread(target=copy_output, args=(proc.stdout, launcher_log),
                                    kwargs={"on_chunk": self.console.raw if self.job.console != "none" else None},
                                    daemon=True)
            pump.start()
            try:
                while proc.poll() is None:
                    if self.cancel.is_set():
                        self._stop(proc)
                        return Outcome(CANCELED, error="canceled by the user")
                    time.sleep(POLL_S)
            finally:
                if proc.poll() is None:
                    self._stop(proc)
                pump.join(timeout=5)
            code = proc.returncode
            failed_rank, error = rankreports.failure(self.record)
            if code == 0 and failed_rank is None:
                return Outcome(COMPLETED)
            return Outcome(FAILED, error=error or f"mpirun exited with code {code} (see {launcher_log})",
                           failed_rank=failed_rank)

    def _stop(self, proc: subprocess.Popen) -> None:
        for sig, wait in ((signal.SIGTERM, self.job.kill_grace_s), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait)
                return
            except subprocess.TimeoutExpired:
                continue
