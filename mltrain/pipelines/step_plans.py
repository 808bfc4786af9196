"""What it takes to make each step's run, kept in the pipeline's own folder (`steps.json`) before any
step's run is made, so that a step whose run was never made can still be made later.

A pipeline makes its steps' runs one after another. When that is cut short (Ctrl-C in its first half
second, a full disk, a killed driver), the pipeline's record names steps whose run directory holds no
run.json, or does not exist; the frozen jobs were only in the dead driver's memory. `runs resume` reads
them from here and makes those runs as the driver would have (the campaign's seeds 85 and 217).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, Optional

from mltrain.base.atomic import atomic_write
from mltrain.jobspec.job import FrozenJob
from mltrain.launch.orchestrate import complete_run, create_run
from mltrain.runs.console import Console
from mltrain.runs.record import RunRecord

FILE = "steps.json"


def plan(step: Any, job: FrozenJob, pipeline: str, pipeline_run: str) -> Dict[str, Any]:
    """One step's plan: its frozen job, its output folders and its mark as a pipeline's step."""
    return {
        "job": job.to_json(),
        "outputs": list(step.outputs),
        "mark": {"pipeline": pipeline, "pipeline_run": pipeline_run, "step": step.name,
                 "input_outputs": {i.name: i.output for i in step.inputs.values() if i.step},
                 "input_steps": {i.name: i.step for i in step.inputs.values() if i.step}},
    }


def write(pipeline_dir: Path, plans: Dict[str, Dict[str, Any]]) -> None:
    atomic_write(pipeline_dir / FILE, json.dumps(plans, indent=1))


def read(pipeline_dir: Path) -> Optional[Dict[str, Dict[str, Any]]]:
    """The plans, or None for a pipeline made before they were kept (0.7 and earlier)."""
    try:
        with open(pipeline_dir / FILE, encoding="utf-8") as f:
            data: Dict[str, Dict[str, Any]] = json.load(f)
    except FileNotFoundError:
        return None
    return data


def make(step_plan: Dict[str, Any], console: Console) -> RunRecord:
    """The step's run: directory, frozen config, snapshot, output folders, its mark as a step."""
    record = create_run(FrozenJob.from_json(step_plan["job"]), console)
    for out in step_plan["outputs"]:
        (record.dir / "outputs" / out).mkdir()
    record.update(pipeline_step=dict(step_plan["mark"]))
    return record


def remake(step_plan: Dict[str, Any], console: Console) -> RunRecord:
    """Make a step's run that was never made. A folder without run.json is what a make cut short left
    (no rank can have started without run.json): it goes first, with a partial snapshot outside it."""
    job = FrozenJob.from_json(step_plan["job"])
    if job.snapshot_source:
        shutil.rmtree(job.cwd, ignore_errors=True)
    shutil.rmtree(job.run_dir, ignore_errors=True)
    return make(step_plan, console)



def complete(record: RunRecord, step_plan: Dict[str, Any], console: Console) -> None:
    """Finish a step's run whose making was cut short after its run.json: its snapshot, output folders
    and mark, as `make` would have left them (each only where it is missing)."""
    complete_run(record, FrozenJob.from_json(step_plan["job"]), console)
    for out in step_plan["outputs"]:
        (record.dir / "outputs" / out).mkdir(parents=True, exist_ok=True)
    if not record.doc.pipeline_step:
        record.update(pipeline_step=dict(step_plan["mark"]))
