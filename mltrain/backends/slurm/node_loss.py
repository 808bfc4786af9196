"""A lost node replaced: a run whose Slurm job ended NODE_FAIL runs again on healthy nodes, without a person.

Slurm itself requeues a batch job whose node died, and then keeps it pending until a node it can use is back,
which may be never. mltrain takes that requeued job (same job id, same run folder, its checkpoints kept) and
excludes the lost node(s) from it (`scontrol update ExcNodeList=`), so it starts again at once on nodes that are
up, up to `compute.max_node_failures` times. Each loss is recorded in run.json (`node_failures`: the attempt, the
node and Slurm's reason for it, when, and what was done), shown by `runs show`. The ranks then start as a requeued
job's do: MLTRAIN_ATTEMPT one higher, the rank contract's checkpoint folder as it was, so a script that saves and
resumes from checkpoints goes on from its last one. When no set of healthy nodes can serve the job (fewer up
than it needs), the run ends Failed saying so, and the job is cancelled.
"""
from __future__ import annotations

import subprocess
import time
from typing import List, Optional

from mltrain.backends.slurm import accounting
from mltrain.backends.slurm.compute import SlurmComputeConf
from mltrain.runs.record import RunRecord
from mltrain.spec.job import FrozenJob
from mltrain.spec.schema import compute_as
from mltrain.spec.status import QUEUED

#: What node_failures records of a loss that was replaced (runs show prints it as is).
REPLACED = "submitted again"
#: Node states sinfo reports for a node a job can be given.
HEALTHY = ("idle", "mixed", "allocated", "completing")


def _names(lost: List[str]) -> List[str]:
    return [entry.split(" (")[0] for entry in lost]


def healthy_nodes(partition: Optional[str], excluded: List[str]) -> List[str]:
    """The partition's nodes that are up and not excluded (empty when Slurm cannot say)."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%T"] + (["-p", partition] if partition else [])
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=accounting.QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    out: List[str] = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        name, state = (line.split("|") + [""])[:2]
        if name not in excluded and name not in out and state.rstrip("*~#$@^-+").lower() in HEALTHY \
                and not state.endswith("*"):
            out.append(name)
    return out


def handled(record: RunRecord, job: accounting.JobState) -> bool:
    """Whether this NODE_FAIL (accounting reports the requeued job so until it runs again) was replaced already."""
    return any(f.get("end") == job.end and f.get("then") == REPLACED for f in record.doc.node_failures)


def replace(record: RunRecord, job: accounting.JobState, job_id: str) -> Optional[str]:
    """Run the job again without its lost node(s); returns what was done (a line for the log), or None when the
    run must end (no replacement left or possible: the reason is recorded in node_failures)."""
    frozen = FrozenJob.load(record.dir)
    compute = compute_as(frozen.compute, SlurmComputeConf)
    failures = list(record.doc.node_failures)
    lost = accounting.lost_nodes(job.nodes) or ([job.nodes] if job.nodes else [])
    excluded = sorted({n for f in failures for n in f.get("excluded", [])} | set(_names(lost)))
    done = len([f for f in failures if f.get("then") == REPLACED])
    entry = {"attempt": done, "job_id": job_id, "lost": lost, "nodes": job.nodes, "end": job.end, "at": time.time(),
             "excluded": excluded}
    if done >= compute.max_node_failures:
        entry["then"] = f"not submitted again: compute.max_node_failures={compute.max_node_failures} used up"
    else:
        healthy = healthy_nodes(compute.partition, excluded)
        if len(healthy) < frozen.node_count:
            entry["then"] = (f"not submitted again: it needs {frozen.node_count} node(s) and "
                             f"{len(healthy)} healthy one(s) are left" + (f" ({', '.join(healthy)})" if healthy else ""))
        elif _exclude(job_id, excluded):
            entry["then"] = REPLACED
        else:
            entry["then"] = "not submitted again: Slurm did not requeue the job (scontrol update refused)"
    record.update(node_failures=failures + [entry])
    if entry["then"] != REPLACED:
        return None
    record.set_status(QUEUED)
    return (f"{QUEUED}: node(s) {', '.join(lost) or job.nodes} lost; Slurm job {job_id} runs again without "
            f"{', '.join(excluded)} (node failure {done + 1} of at most {compute.max_node_failures})")


def why_not(record: RunRecord) -> str:
    """What the last recorded loss says of why the run was not submitted again ('' if it was or none is recorded)."""
    last = record.doc.node_failures[-1] if record.doc.node_failures else None
    then = str(last.get("then", "")) if last else ""
    return f"; {then}" if then.startswith("not submitted again") else ""


#: How long the job may take to be pending again after its NODE_FAIL (Slurm requeues it a moment later).
REQUEUE_WAIT_S = 15.0


def _exclude(job_id: str, nodes: List[str]) -> bool:
    """Keep the requeued job off `nodes`; it must be pending (requeued by Slurm) for that to take."""
    deadline = time.monotonic() + REQUEUE_WAIT_S
    while True:
        try:
            proc = subprocess.run(["scontrol", "update", f"JobId={job_id}", f"ExcNodeList={','.join(nodes)}"],
                                  capture_output=True, text=True, timeout=accounting.QUERY_TIMEOUT_S)
            if proc.returncode == 0:
                return True
        except (OSError, subprocess.TimeoutExpired):
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(1.0)
