"""One MPI rank under `mpirun`: `python -m mltrain.backends.mpi.rank` (started by mltrain, not by users).

Maps the launcher's variables (OMPI_COMM_WORLD_*) to the torch.distributed and Azure ML contract
(RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT, AZ_BATCHAI_*), expands $VARS in the arguments, and
runs the rank program with its output in logs/rank_<N>.log. The program inherits the MPI
variables, so mpi4py and Horovod initialise as if mpirun had started them directly.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Optional

from mltrain.jobspec.job import FrozenJob
from mltrain.ranks import contract, hangs, reports, system_metrics
from mltrain.ranks.process import run_program
from mltrain.ranks.system_metrics import SystemSampler
from mltrain.runs.console import Console


def main() -> None:
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    job = FrozenJob.load(run_dir)
    place = contract.place_from_environment(os.environ, job.process_count_per_node)
    if job.node_count > 1:  # nodes simulated on this machine: mpirun sees one host, the contract lays them out
        place = contract.places(job)[place.rank]
    env = {**os.environ, **contract.rank_env(job, place, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))}
    if job.node_count > 1 and env.get("CUDA_VISIBLE_DEVICES"):  # each simulated node sees its share of the run's GPUs
        devices = env["CUDA_VISIBLE_DEVICES"].split(",")
        share = len(devices) // job.node_count
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices[place.node_rank * share:(place.node_rank + 1) * share])
    reports.write(run_dir, place.rank, pid=os.getpid(), host=os.uname().nodename,
                  devices=env.get("CUDA_VISIBLE_DEVICES"))

    sampler: list[SystemSampler] = []
    watch: list[hangs.RankWatch] = []

    def forward_signals(proc: subprocess.Popen[bytes]) -> None:
        def alive() -> Optional[int]:
            return proc.pid if proc.poll() is None else None

        def stop() -> None:  # a hang: rank 0 ends its program, and mpirun then every rank
            if proc.poll() is None:
                proc.terminate()

        sampler.append(system_metrics.one_rank(run_dir / "metrics.jsonl", job.system_metrics_s, place.rank,
                                               place.local_rank, alive))
        sampler[0].start()
        # the ranks' wrappers meet in the run's folder, as a cluster's do (mltrain.ranks.hangs.RankWatch)
        watch.append(hangs.RankWatch(run_dir, job.hang_timeout_s, place.rank, job.world_size, os.uname().nodename,
                                     0, alive, stop).start())

        def forward(signum: int, frame: Optional[FrameType]) -> None:
            if proc.poll() is None:
                proc.send_signal(signum)

        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, forward)

    # mpirun collects every rank's stdout for the driver: each rank prints only what is shown
    show = job.console == "all" or (job.console == "rank0" and place.rank == 0)
    # whole lines when other ranks share mpirun's output: a part of a line would be forwarded before its end
    shared = job.console == "all" and job.world_size > 1
    on_chunk, on_line = Console().rank_output(place.rank, whole_lines=shared) if show else (None, None)
    code = run_program(contract.rank_argv(job, env), job.cwd, env, run_dir / "logs" / f"rank_{place.rank}.log",
                       on_start=forward_signals, on_chunk=on_chunk, on_line=on_line)
    for s in sampler:
        s.stop()
    message = next((w.message for w in watch if w.message), None)
    for w in watch:
        w.stop()
    reports.write(run_dir, place.rank, exit_code=code if message is None else 1, ended=time.time(),
                  **({"error": message} if message else {}))
    if message is not None:
        sys.exit(1)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
