"""GPUs on Slurm: the rules `compute.gpus_per_node`, `compute.gpus_per_task` and `compute.gpu_bind` must satisfy,
each refused in one line naming the key. The rules between keys are checked while freezing (a dry run
needs no cluster); what the partition's nodes have is asked of Slurm at preflight, before anything is
submitted, because Slurm itself would either refuse the job in words that name no number or, with a
GPU count no node has, never start it."""
from __future__ import annotations

import re
import subprocess
from typing import Any, Dict, Iterable, List, Optional, Tuple

from mltrain.base.errors import ConfigError
from mltrain.jobspec.slurm_compute import SlurmComputeConf

#: What srun --gpu-bind takes in Slurm 22.05 (`verbose,` may come first); map_gpu and mask_gpu lists take
#: `*N` repeats. Only the form is checked: which GPU ids exist is the allocation's to say.
_ID, _MASK = r"\d+(\*\d+)?", r"(0x)?[0-9a-fA-F]+(\*\d+)?"
GPU_BIND = re.compile(rf"^(verbose,)?(none|closest|single:[1-9]\d*|per_task:[1-9]\d*|"
                      rf"map_gpu:{_ID}(,{_ID})*|mask_gpu:{_MASK}(,{_MASK})*)$")
GPU_BIND_FORMS = ("none", "closest", "single:N", "per_task:N", "map_gpu:ID[,ID...]", "mask_gpu:MASK[,MASK...]",
                  "verbose,<any of these>")


def per_node(gpus_per_node: int, gpus_per_task: Optional[int], tasks_per_node: int) -> int:
    """GPUs each node of the job gets: asked per node, or per task times the node's tasks."""
    return int(gpus_per_node) or int(gpus_per_task or 0) * int(tasks_per_node)


def check(cfg: Any) -> None:
    """The GPU keys against each other and the distribution (cfg: the composed config; gpus_per_task's own
    range is checked with the other keys' in mltrain.config.validate)."""
    c, tasks = cfg.compute, int(cfg.distribution.process_count_per_node)
    node, task = int(c.gpus_per_node), int(c.get("gpus_per_task") or 0)
    bind = c.get("gpu_bind")
    if task and node and task * tasks != node:
        raise ConfigError("compute.gpus_per_task",
                          f"{task} per task x {_tasks(tasks)} per node "
                          f"(distribution.process_count_per_node) = {task * tasks}, but compute.gpus_per_node={node}; "
                          "set one of the two, or make them agree")
    if bind is None:
        return
    if not GPU_BIND.match(str(bind)):
        raise ConfigError("compute.gpu_bind", f"'{bind}' is not a Slurm --gpu-bind value", GPU_BIND_FORMS)
    if not (node or task):
        raise ConfigError("compute.gpu_bind", "binds GPUs, but none are asked for: set compute.gpus_per_task "
                                              "or compute.gpus_per_node")


def _tasks(count: int) -> str:
    return f"{count} task{'s' if count != 1 else ''}"


def asked(compute: SlurmComputeConf, tasks_per_node: int, slots: int = 1) -> Tuple[str, int, str]:
    """(key, GPUs per node, how that number came) of a frozen job's request; `slots`: a packed worker's
    (compute.pack_slots), which asks for that many members' GPUs."""
    if compute.gpus_per_task and not compute.gpus_per_node:
        key, count, how = ("compute.gpus_per_task", compute.gpus_per_task * tasks_per_node,
                           f"{compute.gpus_per_task} per task x {_tasks(tasks_per_node)} per node")
    else:
        key, count, how = "compute.gpus_per_node", compute.gpus_per_node, ""
    if slots > 1 and count:
        how = f"{how or count} x {slots} slots (compute.pack_slots)"
        count *= slots
    return key, count, f"{how} = {count} GPUs per node" if how else f"{count} GPUs per node"


def check_partition(requests: Iterable[Tuple[Optional[str], SlurmComputeConf, int, int]]) -> None:
    """Each (partition, compute, tasks per node, slots) against the GPUs its partition's nodes have (sinfo %G),
    asked once for all. Nothing is said where Slurm does not answer: the submission itself will."""
    wanted = [(part, *asked(c, tasks, slots)) for part, c, tasks, slots in requests]
    wanted = [w for w in wanted if w[2] > 0]
    if not wanted:
        return
    have = partition_gpus()
    if have is None:
        return
    for part, key, count, how in wanted:
        name = part if part is not None else have.get("", (None, 0))[0]
        if name is None or name not in have:
            continue
        most = have[name][1]
        if count > most:
            nodes = f"whose nodes have at most {most}" if most else "whose nodes have no GPUs declared (sinfo %G)"
            raise ConfigError(key, f"{how} asked of Slurm partition '{name}', {nodes}")


def partition_gpus() -> Optional[Dict[str, Tuple[str, int]]]:
    """{partition: (name, most GPUs on one of its nodes)}, the default partition also under "", from
    `sinfo -h -o %P|%G`; None when Slurm cannot say."""
    try:
        proc = subprocess.run(["sinfo", "-h", "-o", "%P|%G"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    return parse_partition_gpus(proc.stdout)


def parse_partition_gpus(text: str) -> Dict[str, Tuple[str, int]]:
    out: Dict[str, Tuple[str, int]] = {}
    default = None
    for line in text.splitlines():  # a partition has a line per distinct node configuration
        part, sep, gres = line.strip().partition("|")
        if not sep:
            continue
        name = part.rstrip("*")
        default = name if part.endswith("*") else default
        out[name] = (name, max(gres_gpus(gres), out.get(name, (name, 0))[1]))
    if default is not None:
        out[""] = out[default]
    return out


def gres_gpus(gres: str) -> int:
    """GPUs in one node's Gres as sinfo prints it: `gpu:4`, `gpu:a100:4(S:0-1)`, `gpu:a100:2,gpu:v100:2`,
    `(null)`; the types summed, other resources (mps, shard) left out."""
    total = 0
    for entry in re.sub(r"\([^)]*\)", "", gres).split(","):
        fields: List[str] = entry.strip().split(":")
        if fields[0] == "gpu" and len(fields) > 1:
            digits = re.match(r"\d+", fields[-1])
            total += int(digits.group()) if digits else 0
    return total
