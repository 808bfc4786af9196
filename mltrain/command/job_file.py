"""An Azure ML v2 job file's plan (mltrain.azureml.job_plan) as the command's request: what `mltrain job create`
runs, and what a pipeline's sweep step runs in its own process (mltrain.command.sweep_step_program). The file's
generated config groups are config options held in memory; a sweep writes them into its own folder for
`runs resume SWEEP`."""
from __future__ import annotations

from mltrain.azureml.job_create import JobCreate, config_nodes_of, empty_code
from mltrain.azureml.job_plan import plan as plan_job
from mltrain.command.app import run_app
from mltrain.config.sections import open_mapping, open_sections
from mltrain.launch.request import Request
from mltrain.runs.console import Console


def run_job_file(request: JobCreate, detach: bool = False, isolate: bool = False) -> None:
    """Plan the file (its notes said, its plan printed by a dry run) and run it to its end, or until it is queued
    (`detach`). Raises as run_app does. `isolate`: as for run_app (False where this process runs nothing else)."""
    plan = plan_job(request)
    console = Console()
    for note in plan.notes:
        console.status(f"azureml: {note}")
    if request.dry_run:
        for line in plan.lines:
            console.write_line(line)
    user = list(request.overrides)
    # One run, a sweep or a pipeline (or a command job swept from the command line, `compute=local,slurm`):
    # the plan's overrides first, the user's after (they win), as `mltrain [-m]` takes them
    mine = [o for o in plan.overrides if _key(o) not in {_key(u) for u in user}]
    chosen = open_sections([open_mapping(o) for o in mine + user])
    chosen += ["dry_run=true"] if request.dry_run else []
    with empty_code(request.dry_run) as empty:
        nodes = config_nodes_of(plan.files, str(empty))
        run_app(Request(overrides=tuple(chosen), config_dirs=tuple(plan.config_dirs), nodes=nodes, detach=detach),
                isolate=isolate)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")
