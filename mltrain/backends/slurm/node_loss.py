"""A lost node replaced: a run whose Slurm job ended NODE_FAIL runs again on healthy nodes, without a person.

Slurm itself requeues a batch job whose node died, and then keeps it pending until a node it can use is back,
which may be never. mltrain takes that requeued job (same job id, same run folder, its checkpoints kept) and
excludes the lost node(s) from it (`scontrol update ExcNodeList=`), so it starts again at once on nodes that are
up, up to `compute.max_node_failures` times. Each loss is recorded in run.json (`node_failures`: the attempt, the
node and Slurm's reason for it, when, and what was done), shown by `runs show`. The ranks then start as a requeued
job's do: MLTRAIN_ATTEMPT one higher, the rank contract's checkpoint folder as it was, so a script that saves and
resumes from checkpoints goes on from its last one. When no set of healthy nodes can serve the job (fewer up
than it needs), the run ends Failed saying so, and the job is cancelled.

Slurm may also be quicker than the driver's look: it requeues the job and starts it again on a healthy node
before any `sacct` has shown it waiting after its NODE_FAIL. Such a loss is recognised after the fact, in the
job's earlier incarnations (`sacct -D` lists each apart: look_back), and recorded all the same, once.
"""
from __future__ import annotations

import dataclasses
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

from mltrain.backends.slurm import accounting
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import QUEUED, TERMINAL
from mltrain.ranks import reports
from mltrain.runs.console import Console, RunLog
from mltrain.runs.record import RunRecord

#: What node_failures records of a loss that was replaced (runs show prints it as is).
REPLACED = "submitted again"
#: ...and of a loss Slurm repaired itself before the driver saw it (look_back); it counts as a replacement.
BY_SLURM = f"{REPLACED} by Slurm, before mltrain saw the loss"
#: ...and of one Slurm started again before mltrain could keep it off the lost node(s) (it runs on others).
STARTED_BY_SLURM = f"{REPLACED} by Slurm, before mltrain could keep it off the lost node(s)"
#: The states of a job that runs again (squeue).
UNDER_WAY = ("RUNNING", "CONFIGURING", "COMPLETING")
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


def replaced(entry: Dict[str, Any]) -> bool:
    """Whether a recorded loss was followed by the job running again (by mltrain or by Slurm itself)."""
    return str(entry.get("then", "")).startswith(REPLACED)


def recorded(record: RunRecord, job: accounting.JobState) -> Optional[Dict[str, Any]]:
    """The loss run.json records for this NODE_FAIL incarnation, if any: an incarnation is known by its end
    (accounting reports the requeued job NODE_FAIL until it runs again, so the same loss is seen at each look)."""
    return next((f for f in record.doc.node_failures if f.get("end") == job.end), None)


def look_back(record: RunRecord, job: accounting.JobState, job_id: str,
              console: Optional[Console] = None) -> accounting.JobState:
    """Record every NODE_FAIL incarnation of the job that run.json does not list yet, other than the one `job`
    itself reports (replace() takes that one): Slurm requeued the job and ran it again before a look saw it
    wait. Each counts once towards compute.max_node_failures. When the ranks' reports ended the run (`job` is
    not accounting's word) and they ran a later attempt, accounting is asked, waiting briefly for it to list
    every incarnation. Returns the state to go on with: `job`, or a loss beyond compute.max_node_failures while
    the job runs on (the run ends there, as it would have had the loss been seen in time)."""
    said, stop = _record_late(record, job, job_id)
    for line in said:
        RunLog(record.log_path(), console).info(line, show=True)
    return stop or job


def _record_late(record: RunRecord, job: accounting.JobState,
                 job_id: str) -> Tuple[List[str], Optional[accounting.JobState]]:
    ended = job.status in TERMINAL
    current = job.end if job.state == "NODE_FAIL" and job.incarnations else None
    if not job.incarnations:
        if not ended:
            return [], None
        attempt = max((int(r.get("attempt") or 0) for r in reports.read_now(record.dir).values()), default=0)
        found = accounting.look_back(job_id, attempt + 1) if attempt else None
        if found is None:
            return [], None
        job = found
    known = {f.get("end") for f in record.doc.node_failures}
    # An incarnation that ended before this run existed is another job's that had this id: Slurm reuses ids (its
    # counter started again, its accounting kept the old job), and sacct -D lists both (chaos seed 152, third pass:
    # an older job's NODE_FAIL used up compute.max_node_failures, so the real loss ended the run)
    since = record.doc.created - 1
    new = [f for f in job.node_fails if f.end not in known and f.end != current and (f.end or since) >= since]
    if not new:
        return [], None
    most = compute_as(FrozenJob.load(record.dir).compute, SlurmComputeConf).max_node_failures
    failures = list(record.doc.node_failures)
    said: List[str] = []
    stop: Optional[accounting.JobState] = None
    for loss in new:
        lost = accounting.lost_nodes(loss.nodes) or ([loss.nodes] if loss.nodes else [])
        done = len([f for f in failures if replaced(f)])
        entry = {"attempt": done, "job_id": job_id, "lost": lost, "nodes": loss.nodes, "end": loss.end, "at": time.time(),
                 # kept out of any later replacement (replace() excludes every node recorded here)
                 "excluded": sorted({n for f in failures for n in f.get("excluded", [])} | set(_names(lost)))}
        if done < most or ended:
            entry["then"] = BY_SLURM + ("" if done < most else f" (beyond compute.max_node_failures={most})")
            said.append(f"node(s) {', '.join(lost) or loss.nodes} lost; Slurm had already run job {job_id} again on "
                        f"other nodes (node failure {done + 1} of at most {most})")
        else:
            entry["then"] = f"stopped: compute.max_node_failures={most} used up (Slurm had run the job again)"
            stop = stop or dataclasses.replace(loss, incarnations=job.incarnations)  # accounting's word: not asked again
        failures.append(entry)
    record.update(node_failures=failures)
    return said, stop


def replace(record: RunRecord, job: accounting.JobState, job_id: str) -> Optional[str]:
    """Run the job again without its lost node(s); returns what was done (a line for the log), or None when the
    run must end (no replacement left or possible: the reason is recorded in node_failures)."""
    frozen = FrozenJob.load(record.dir)
    compute = compute_as(frozen.compute, SlurmComputeConf)
    failures = list(record.doc.node_failures)
    lost = accounting.lost_nodes(job.nodes) or ([job.nodes] if job.nodes else [])
    excluded = sorted({n for f in failures for n in f.get("excluded", [])} | set(_names(lost)))
    done = len([f for f in failures if replaced(f)])
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
        elif accounting.queue_state(job_id) in UNDER_WAY:  # the update was refused: Slurm had started it already
            entry["then"] = STARTED_BY_SLURM
        else:
            entry["then"] = "not submitted again: Slurm did not requeue the job (scontrol update refused)"
    record.update(node_failures=failures + [entry])
    if entry["then"] == STARTED_BY_SLURM:
        return (f"node(s) {', '.join(lost) or job.nodes} lost; Slurm had already run job {job_id} again on other "
                f"nodes (node failure {done + 1} of at most {compute.max_node_failures})")
    if entry["then"] != REPLACED:
        return None
    record.set_status(QUEUED)
    return (f"{QUEUED}: node(s) {', '.join(lost) or job.nodes} lost; Slurm job {job_id} runs again without "
            f"{', '.join(excluded)} (node failure {done + 1} of at most {compute.max_node_failures})")


def why_not(record: RunRecord) -> str:
    """What the last recorded loss says of why the run did not go on ('' if it did or none is recorded)."""
    last = record.doc.node_failures[-1] if record.doc.node_failures else None
    return f"; {last.get('then')}" if last and last.get("then") and not replaced(last) else ""


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
