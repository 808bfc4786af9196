"""The pipeline's own run: a run directory like any other, whose run.json holds the graph, each
step's run id, status and timings, and a status of its own derived from its steps'. Also what
happens to a step's run when it ends: its outputs digested and indexed for reuse, or, when an
upstream step did not complete, the reason it never ran.

Both the pipeline's driver and, for a detached Slurm pipeline, whoever looks at it later
(mltrain.pipelines.backend) bring it up to date with the same functions.
"""
from __future__ import annotations

import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from mltrain import backends
from mltrain.jobspec.records import PipelineGraph, RunDoc, StepEntry, World
from mltrain.jobspec.status import (
    CANCELED,
    COMPLETED,
    FAILED,
    NOT_STARTED,
    PREPARING,
    QUEUED,
    RUNNING,
    TERMINAL,
)
from mltrain.pipelines import reuse, step_plans
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord, note_made

#: What a pipeline's own run names as its backend: it has none, its steps each have theirs.
PIPELINE_BACKEND = "pipeline"


def create(run_dir: Path, name: str, steps: List[Any], runs: Dict[str, Any], mode: str,
           overrides: List[str], continue_on_step_failure: bool = True) -> RunRecord:
    """The pipeline's run directory and record; `runs` maps each step to its frozen job. Each step's plan
    is written before the record: a pipeline that exists can always make the steps it names."""
    run_dir.mkdir(parents=True, exist_ok=False)
    note_made(run_dir)
    try:
        (run_dir / "logs").mkdir()
        step_plans.write(run_dir, {s.name: step_plans.plan(s, runs[s.name], name, run_dir.name) for s in steps})
        return _record(run_dir, name, steps, runs, mode, overrides, continue_on_step_failure)
    except BaseException:  # never made (a full disk, Ctrl-C): no half-made folder is left behind
        shutil.rmtree(run_dir, ignore_errors=True)
        raise


def _record(run_dir: Path, name: str, steps: List[Any], runs: Dict[str, Any], mode: str,
            overrides: List[str], continue_on_step_failure: bool) -> RunRecord:
    now = time.time()
    table = {s.name: StepEntry(run_id=runs[s.name].run_id, run_dir=runs[s.name].run_dir, parents=list(s.parents),
                               status=NOT_STARTED) for s in steps}
    record = RunRecord(run_dir, RunDoc(
        id=run_dir.name, experiment=name, status=NOT_STARTED, created=now, phases={NOT_STARTED: now},
        host=socket.gethostname(), driver_pid=os.getpid(), backend=PIPELINE_BACKEND, compute=mode,
        distribution="pipeline", world=World(0, 0, sum(runs[s.name].world_size for s in steps)),
        command=[os.path.basename(sys.argv[0]) or "mltrain", *sys.argv[1:]], cwd=os.getcwd(), overrides=overrides,
        pipeline=PipelineGraph(name=name, mode=mode, order=[s.name for s in steps], steps=table,
                               continue_on_step_failure=continue_on_step_failure)))
    record.save()
    return record


def overall(statuses: List[str]) -> str:
    """The pipeline's status from its steps': Completed when all are, Failed when one failed,
    Canceled when one was canceled (and none failed), else how far the furthest step has come."""
    if all(s == COMPLETED for s in statuses):
        return COMPLETED
    if any(s not in TERMINAL for s in statuses):
        if any(s in (RUNNING, "Finalizing") for s in statuses):
            return RUNNING
        return QUEUED if any(s in (QUEUED, PREPARING, COMPLETED) for s in statuses) else NOT_STARTED
    return FAILED if FAILED in statuses else CANCELED


def sync(pipeline: RunRecord) -> str:
    """Copy each step's status into the pipeline's record and derive the pipeline's own status."""
    table = pipeline.doc.pipeline.steps
    for info in table.values():
        try:
            step = RunRecord.load(info.run_dir)
        except Exception:  # a deleted step run: the pipeline cannot have completed
            info.status, info.reason = FAILED, info.reason or "its run directory is gone"
            continue
        info.status = step.status
        info.phases = dict(step.doc.phases)
        mark = step.doc.pipeline_step or {}
        info.reused_from = mark.get("reused_from")
        info.reason = mark.get("decision") or info.reason
        if step.status in (FAILED, CANCELED) and step.doc.error:
            info.error = step.doc.error
        where = backends.backend_of(step).locate(step)
        if where:
            info.scheduler = where
    status = overall([info.status for info in table.values()])
    # The pipeline's phases come from its steps' own times, not from when someone looked (a detached graph).
    times = [i.phases or {} for i in table.values()]
    ran = [p[RUNNING] for p in times if RUNNING in p]
    if ran and RUNNING not in pipeline.doc.phases and status != NOT_STARTED:
        pipeline.doc.phases[RUNNING] = min(ran)
    at = max((max(p.values()) for p in times if p), default=None) if status in TERMINAL else None
    if status != pipeline.status:
        error = None
        if status in (FAILED, CANCELED):
            bad = [n for n, i in table.items() if i.status == status and "upstream step" not in (i.error or "")]
            error = f"step {', '.join(bad)} {status.lower()}" if bad else status.lower()
        pipeline.set_status(status, at=at, error=error, pipeline=pipeline.doc.pipeline)
    else:
        pipeline.update(pipeline=pipeline.doc.pipeline)
    return status


# ------------------------------------------------------------------------------------- a step's end
def settle_completed(step: RunRecord, root: Path, parents: Dict[str, RunRecord]) -> None:
    """A step that ran and completed: digest its outputs, fill in the input digests that were still
    pending when it was queued (a Slurm graph), and index it as a producer for later reuse."""
    mark = dict(step.doc.pipeline_step or {})
    # no parts: the step never reached its reuse decision (its driver died first, then `runs resume`
    # ran it), so it is not indexed as a producer
    if not mark or "parts" not in mark or mark.get("produced") is not None or mark.get("reused_from"):
        return
    parts = dict(mark["parts"])
    inputs = dict(parts.get("inputs") or {})
    for name, value in inputs.items():
        if str(value).startswith("pending:"):
            parent = parents.get(str(value).split(":", 2)[1])
            produced = ((parent.doc.pipeline_step or {}).get("produced") or {}) if parent else {}
            output = mark["input_outputs"][name]
            inputs[name] = produced.get(output, {}).get("digest", value)
    parts["inputs"] = inputs
    mark["parts"] = parts
    mark["produced"] = reuse.outputs_record(step.dir, mark["parts"].get("outputs") or [])
    if not any(str(v).startswith("pending:") for v in inputs.values()):
        mark["key"] = reuse.key_of(parts)
        reuse.record(root, {"key": mark["key"], "run_dir": str(step.dir), "run_id": step.id,
                            "pipeline": mark["pipeline"], "step": mark["step"]})
    step.update(pipeline_step=mark)


def cancel_unstarted(step: RunRecord, reason: str, console: Optional[Any] = None) -> None:
    """A step that never started because an upstream step did not complete (or the pipeline stopped)."""
    step.reload()
    if step.status in TERMINAL:
        return
    mark = dict(step.doc.pipeline_step or {})
    mark["decision"] = reason
    step.update(pipeline_step=mark)
    finish(step, CANCELED, error=reason, console=console)


def upstream_reason(step: RunRecord, parents: Dict[str, RunRecord]) -> Optional[str]:
    """Why a step cannot run: the first of its parents that ended without completing."""
    for name, parent in parents.items():
        if parent.status in (FAILED, CANCELED):
            return f"upstream step {name} {parent.status.lower()}"
    return None


def failed_step(steps: Dict[str, RunRecord]) -> Optional[str]:
    """The first step that failed (steps that never ran for an upstream step are Canceled, not Failed)."""
    return next((n for n, s in steps.items() if s.status == FAILED), None)


def stop_reason(failed: str) -> str:
    return f"step {failed} failed and continue_on_step_failure is false"


def stop_graph(steps: Dict[str, RunRecord], cancel: Callable[[RunRecord], None]) -> Optional[str]:
    """continue_on_step_failure false on a queued graph: once a step failed, every step that has not
    ended is canceled (`cancel` stops a queued or running one), its error naming the failed step."""
    failed = failed_step(steps)
    if failed is None:
        return None
    reason = stop_reason(failed)
    for step in steps.values():
        step.reload()
        if step.status in TERMINAL:
            continue
        if step.status == NOT_STARTED:
            cancel_unstarted(step, f"not started: {reason}")
            continue
        cancel(step)
        step.reload()
        if step.status == CANCELED:
            step.update(error=f"canceled: {reason}", pipeline_step={**(step.doc.pipeline_step or {}),
                                                                     "decision": f"canceled: {reason}"})
    return reason


def settle_graph(root: Path, steps: Dict[str, RunRecord], parents: Dict[str, List[str]]) -> None:
    """Steps of a queued graph that ended: completed ones digested and indexed (parents first), and
    those Slurm removed because a parent failed told why."""
    for name, step in steps.items():  # parents come first in the table
        step.reload()
        mine = {p: steps[p] for p in parents.get(name, []) if p in steps}
        if step.status == COMPLETED:
            settle_completed(step, root, mine)
            continue
        reason = upstream_reason(step, mine)
        if step.status == CANCELED and reason and "upstream step" not in (step.doc.error or ""):
            mark = {**(step.doc.pipeline_step or {}), "decision": reason}
            step.update(error=reason, pipeline_step=mark)
