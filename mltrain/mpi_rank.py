"""One MPI rank under `mpirun`: `python -m mltrain.mpi_rank` (started by mltrain, not by users).

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
from pathlib import Path


def main() -> None:
    from mltrain import rankenv, rankreports
    from mltrain.frozen import FrozenJob
    from mltrain.supervisor import copy_output

    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    job = FrozenJob.load(run_dir)
    place = rankenv.place_from_environment(os.environ, job.process_count_per_node)
    env = {**os.environ, **rankenv.rank_env(job, place, os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))}
    argv = rankenv.rank_argv(job, env)
    rankreports.write(run_dir, place.rank, pid=os.getpid(), host=os.uname().nodename)
    proc = subprocess.Popen(argv, cwd=job.cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(sig, lambda s, f: proc.poll() is None and proc.send_signal(s))
    out = sys.stdout.buffer
    echo_all = job.console == "all"
    on_chunk = on_line = None
    if place.rank == 0 and job.console != "none":
        on_chunk = lambda c: (out.write(c), out.flush())  # noqa: E731
    elif echo_all:
        on_line = lambda line: (out.write(f"[rank {place.rank}] {line}\n".encode()), out.flush())  # noqa: E731
    copy_output(proc.stdout, run_dir / "logs" / f"rank_{place.rank}.log", on_chunk=on_chunk, on_line=on_line)
    code = proc.wait()
    rankreports.write(run_dir, place.rank, exit_code=code)
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
