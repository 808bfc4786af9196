"""`mltrain runs resume PIPELINE`: a pipeline that ended Failed or Canceled (a failed step, a cancel, a
driver that died) continues in its own run directories. Steps that completed are kept as they are
(their outputs are where their dependants' frozen jobs already point); every other step runs again in its
own directory, from its frozen job, parents first, as `runs resume` runs a single run (a built-in trainer
continues from its checkpoint). A step whose parent still does not complete is canceled, naming it.

Steps run one after another in graph order, also where the first run ran independent branches side by
side: a resume is for the steps that are left, usually one or two.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Dict, List, Tuple

from mltrain.backends import refresh
from mltrain.base.errors import MltrainError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, TERMINAL
from mltrain.launch.orchestrate import execute
from mltrain.pipelines import graph_record, step_plans
from mltrain.runs.console import Console
from mltrain.runs.record import RunRecord


def resume(pipeline: RunRecord) -> str:
    """Run again the steps of `pipeline` that did not complete; returns the pipeline's final status."""
    graph = pipeline.doc.pipeline
    assert graph is not None  # the caller checked that this run is a pipeline
    console = Console()
    steps, unmade = _step_runs(pipeline)
    refresh(list(steps.values()))  # a driver that died: its steps read Failed "driver lost" from here
    status = graph_record.sync(pipeline)
    if status not in (FAILED, CANCELED):
        raise MltrainError(f"pipeline {pipeline.id} is {status}; only a Failed or Canceled pipeline can be resumed"
                           + ("" if status == COMPLETED else f" (follow it with `mltrain runs status {pipeline.id}`)"))
    _make(pipeline, unmade, steps)  # its driver is gone (the pipeline ended): nobody else makes them
    kept = [n for n in graph.order if steps[n].status == COMPLETED]
    again = [n for n in graph.order if n not in kept]
    console.status(f"resuming pipeline {pipeline.id}: kept (completed) [{', '.join(kept)}]; "
                   f"running again [{', '.join(again)}]")
    pipeline.reopen()
    root = pipeline.dir.parent
    for name in again:
        step, parents = steps[name], {p: steps[p] for p in graph.steps[name].parents}
        step_console = Console(prefix=f"[{name}] ")
        blocked = [p for p, record in parents.items() if record.status != COMPLETED]
        if blocked:
            reason = f"upstream step {blocked[0]} {parents[blocked[0]].status.lower()}"
            if step.status in TERMINAL:
                step.reopen()
            graph_record.cancel_unstarted(step, reason, step_console)
            continue
        job = dataclasses.replace(FrozenJob.load(step.dir), detach=False)
        step.reopen()
        execute([job], [step], [step_console])
        step.reload()
        if step.status == COMPLETED:
            graph_record.settle_completed(step, root, parents)
        graph_record.sync(pipeline)
    final = graph_record.sync(pipeline)
    _summary(pipeline, again, console)
    return final


def _step_runs(pipeline: RunRecord) -> Tuple[Dict[str, RunRecord], List[str]]:
    """Each step's run, and the steps whose run was never made (their driver cut short while making the
    steps: Ctrl-C, a full disk, a kill) where the pipeline kept the plans to make them. A run.json that is
    there but unreadable, or a step of a pipeline of 0.7 (no plans), is not guessed at."""
    graph = pipeline.doc.pipeline
    assert graph is not None
    plans = step_plans.read(pipeline.dir) or {}
    steps: Dict[str, RunRecord] = {}
    unmade: List[str] = []
    for name in graph.order:
        run_dir = Path(graph.steps[name].run_dir)
        if not (run_dir / "run.json").exists() and name in plans:
            unmade.append(name)
            continue
        try:
            steps[name] = RunRecord.load(run_dir)
        except Exception as exc:  # noqa: BLE001 - a step's folder removed by hand
            raise MltrainError(f"pipeline {pipeline.id} cannot be resumed: step {name}'s run is unreadable "
                               f"({exc})") from None
    return steps, unmade


def _make(pipeline: RunRecord, unmade: List[str], steps: Dict[str, RunRecord]) -> None:
    """Make the runs never made, and finish those made in part, as their driver would have; a run made
    here reads Canceled until it runs below."""
    plans = step_plans.read(pipeline.dir) or {}
    for name, plan in plans.items():
        step_console = Console(prefix=f"[{name}] ")
        if name in unmade:
            steps[name] = step_plans.remake(plan, step_console)
            graph_record.cancel_unstarted(steps[name], "not started: its pipeline's driver stopped before making "
                                          "its run", step_console)
        elif steps[name].status != COMPLETED:
            step_plans.complete(steps[name], plan, step_console)


def _summary(pipeline: RunRecord, again: List[str], console: Console) -> None:
    pipeline.reload()
    graph = pipeline.doc.pipeline
    assert graph is not None
    console.status(f"pipeline {graph.name} {pipeline.status} ({len(graph.order)} steps)  {pipeline.dir}")
    for name in graph.order:
        info = graph.steps[name]
        how = "ran again" if name in again else "kept"
        console.write_line(f"  {name:<16} {info.status:<9} {how:<9}  {info.run_id}  {info.error or ''}".rstrip())
