"""The rank environment contract (SPEC section 4), the same for every backend.

A backend knows where a rank sits (global rank, local rank, node rank) and where the rendezvous is
(MASTER_ADDR:MASTER_PORT); this module turns that into the variables torchrun and Azure ML set,
and expands $VARS in the rank's arguments against them.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence

from mltrain.jobspec.job import FrozenJob

#: The contract's variable names, in the order a dry run prints them.
CONTRACT = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "NODE_RANK",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "AZ_BATCHAI_PYTORCH_INIT_METHOD",
    "AZ_BATCHAI_TASK_INDEX",
    "AZ_BATCH_MASTER_NODE",
    "MLTRAIN_RUN_ID",
    "MLTRAIN_RUN_DIR",
    "MLTRAIN_OUTPUTS_DIR",
    "MLTRAIN_BACKEND",
    "TF_CONFIG",
)


@dataclass(frozen=True)
class RankPlace:
    rank: int
    local_rank: int
    node_rank: int


def places(job: FrozenJob) -> List[RankPlace]:
    """Ranks laid out node by node, as torchrun and srun (block distribution) do."""
    per_node = job.process_count_per_node
    return [RankPlace(r, r % per_node, r // per_node) for r in range(job.world_size)]


def place_from_environment(environ: Mapping[str, str], per_node: int) -> RankPlace:
    """Where this process sits, from the variables its launcher set: Open MPI's mpirun
    (OMPI_COMM_WORLD_*), a PMIx launcher such as srun --mpi=pmix (PMIX_RANK), or Slurm (SLURM_PROCID)."""
    if "OMPI_COMM_WORLD_RANK" in environ:
        rank = int(environ["OMPI_COMM_WORLD_RANK"])
        local = int(environ.get("OMPI_COMM_WORLD_LOCAL_RANK", rank % per_node))
        node = int(environ.get("OMPI_COMM_WORLD_NODE_RANK", rank // per_node))
        return RankPlace(rank, local, node)
    if "SLURM_PROCID" in environ:
        rank = int(environ["SLURM_PROCID"])
        return RankPlace(rank, int(environ.get("SLURM_LOCALID", rank % per_node)), int(environ.get("SLURM_NODEID", rank // per_node)))
    if "PMIX_RANK" in environ:
        rank = int(environ["PMIX_RANK"])
        return RankPlace(rank, rank % per_node, rank // per_node)
    raise RuntimeError("no rank variables found (OMPI_COMM_WORLD_RANK, SLURM_PROCID or PMIX_RANK)")


def tf_config(workers: Sequence[str], index: int) -> str:
    """TensorFlow's cluster spec as Azure ML sets it for a tensorflow job: every worker's host:port and
    this rank's place among them."""
    return json.dumps({"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": index},
                       "environment": "cloud"})


def planned_workers(job: FrozenJob, host: str) -> List[str]:
    """The TF_CONFIG workers a plan shows: the ports are chosen when the run starts."""
    return [f"{host}:<worker {r} port>" for r in range(job.world_size)]


def rank_env(job: FrozenJob, place: RankPlace, master_addr: str, master_port: int | str,
             workers: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """The variables one rank gets on top of the launcher's own environment (a dry run passes
    placeholders for a rendezvous that only the cluster will know). `workers`: every rank's
    host:port for TF_CONFIG (distribution.tf_config), placeholders where not known yet."""
    env = dict(job.env)
    env.update(
        RANK=str(place.rank),
        WORLD_SIZE=str(job.world_size),
        LOCAL_RANK=str(place.local_rank),
        LOCAL_WORLD_SIZE=str(job.process_count_per_node),
        NODE_RANK=str(place.node_rank),
        GROUP_RANK=str(place.node_rank),
        MASTER_ADDR=master_addr,
        MASTER_PORT=str(master_port),
        AZ_BATCHAI_PYTORCH_INIT_METHOD=f"tcp://{master_addr}:{master_port}",
        AZ_BATCHAI_TASK_INDEX=str(place.rank),
        AZ_BATCH_MASTER_NODE=f"{master_addr}:{master_port}",
        MLTRAIN_RUN_ID=job.run_id,
        MLTRAIN_RUN_DIR=job.run_dir,
        MLTRAIN_OUTPUTS_DIR=os.path.join(job.run_dir, "outputs"),
        # Rank output is streamed line by line to the logs and the console.
        PYTHONUNBUFFERED="1",
    )
    if job.process_group:
        env["MLTRAIN_BACKEND"] = job.process_group
    if job.distribution.tf_config:
        env["TF_CONFIG"] = tf_config(workers or planned_workers(job, master_addr), place.rank)
    return env


def thread_env(job: FrozenJob, base: Mapping[str, str], cpus: int) -> Dict[str, str]:
    """Split this node's cores between its ranks unless the user chose a thread count (a lone rank
    gets them all, stated, as the README promises every rank gets OMP_NUM_THREADS).

    torchrun sets OMP_NUM_THREADS=1 for several ranks; sharing the cores out is as safe and faster.
    """
    if "OMP_NUM_THREADS" in base or "OMP_NUM_THREADS" in job.env:
        return {}
    return {"OMP_NUM_THREADS": str(max(1, cpus // job.process_count_per_node))}


_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Expand $VAR and ${VAR} from the rank's environment; unknown names are left as written."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return env.get(name, m.group(0))

    return _VAR.sub(sub, text)


#: How a `command` job's text runs (mltrain.launch.programs): the shell expands its $VARS itself.
SHELL = ["/bin/sh", "-c"]


def rank_argv(job: FrozenJob, env: Mapping[str, str]) -> List[str]:
    """The rank's command line, $VARS expanded in its arguments; a command's text is left to its shell, which
    expands them from the rank's environment as the shell would (quotes in a value kept, TF_CONFIG's real ports)."""
    if job.argv[:2] == SHELL:
        return list(job.argv)
    return [job.argv[0]] + [expand(a, env) for a in job.argv[1:]]


def plan(job: FrozenJob, master_addr: str, master_port: int | str, cpus: Optional[int] = None,
         extra: Optional[Dict[str, str]] = None) -> List[dict]:
    """Per rank: argv, cwd and the variables added to the launcher's environment. `cpus` (this node's)
    splits the threads between the ranks; without it the rank decides where it runs."""
    common = dict(extra or {})
    if cpus:
        common.update(thread_env(job, os.environ, cpus))
    out = []
    for place in places(job):
        env = {**common, **rank_env(job, place, master_addr, master_port)}
        out.append({"rank": place.rank, "place": place, "argv": rank_argv(job, {**os.environ, **env}),
                    "cwd": job.cwd, "env": env})
    return out
