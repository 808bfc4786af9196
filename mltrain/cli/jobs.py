"""`mltrain job create --file job.yml`: an Azure ML v2 job file run as `az ml job create` runs it.

    mltrain job create --file job.yml [--set FIELD=VALUE ...] [--name N] [--experiment-name E]
                       [--stream | --detach] [--dry-run] [mltrain overrides ...]

The file is read and checked whole (mltrain.azureml) before anything exists. A command job is then one
typed job request composed and run in this process (mltrain.launch.request); a sweep or a pipeline runs
through mltrain's own command. Every override (`compute=slurm`, `run.root=...`) and flag behaves as it
does for `mltrain ...`.
"""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import yaml

from mltrain.azureml import job_plan
from mltrain.azureml.job_request import EMPTY_CODE, GROUP, Plan, Request
from mltrain.cli.main import _open_mapping
from mltrain.cli.main import main as mltrain_main
from mltrain.config.paths import extra_config_dirs
from mltrain.errors import MltrainError
from mltrain.runs.console import Console

USAGE = ("usage: mltrain job create --file FILE [--set FIELD=VALUE ...] [--name NAME] [--experiment-name NAME] "
         "[--stream|--detach] [--dry-run] [mltrain overrides ...]")


def main(argv: List[str]) -> Optional[int]:

    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\n")
        return 0
    if argv[0] != "create":
        raise MltrainError(f"unknown job command '{argv[0]}' ({USAGE})")
    request, flags = _parse(argv[1:])

    plan = job_plan.plan(request)
    return _launch(plan, request, flags)


def _parse(args: List[str]):

    file = name = experiment = None
    sets: List[str] = []
    overrides: List[str] = []
    flags: List[str] = []
    valued = {"--file", "-f", "--set", "--name", "-n", "--experiment-name"}
    i = 0
    while i < len(args):
        arg = args[i]
        key, eq, inline = arg.partition("=")
        if arg.startswith("-") and key in valued:
            if eq:
                value = inline
            elif i + 1 < len(args):
                i += 1
                value = args[i]
            else:
                raise MltrainError(f"{key} needs a value ({USAGE})")
            if key in ("--file", "-f"):
                file = value
            elif key == "--set":
                sets.append(value)
            elif key in ("--name", "-n"):
                name = value
            else:
                experiment = value
        elif arg in ("--stream", "--detach", "--dry-run"):
            flags.append(arg)
        elif arg.startswith("-"):
            raise MltrainError(f"unknown option {arg} ({USAGE})")
        else:
            overrides.append(arg)
        i += 1
    if file is None:
        raise MltrainError(f"--file is required ({USAGE})")
    if "--stream" in flags and "--detach" in flags:
        raise MltrainError("--stream and --detach exclude each other")
    request = Request(file=file, sets=tuple(sets), name=name, experiment_name=experiment,
                      overrides=tuple(overrides), dry_run="--dry-run" in flags)
    return request, flags


def _launch(plan, request, flags: List[str]) -> Optional[int]:
    console = Console()
    for note in plan.notes:
        console.status(f"azureml: {note}")
    if request.dry_run:
        for line in plan.lines:
            console.write_line(line)
    user = list(request.overrides)
    mine = [o for o in plan.overrides if _key(o) not in {_key(u) for u in user}]
    extra = [f for f in flags if f in ("--detach", "--dry-run")]
    if plan.kind == "command" and not _sweeps(user):
        return _run_command_job(plan, mine + user, extra, console)
    # A sweep or a pipeline (or a command job swept from the command line, `compute=local,slurm`) still runs
    # through `mltrain -m`'s Hydra sweeper, from generated config files: `runs resume SWEEP` composes the
    # members again from the config folders the sweep recorded, and the generated folder is copied into the
    # sweep for that (mltrain.sweeps.resume).
    folder = tempfile.mkdtemp(prefix="mltrain-azureml-")
    atexit.register(shutil.rmtree, folder, True)
    os.makedirs(os.path.join(folder, EMPTY_CODE))
    for rel, values in plan.files.items():
        values = _absolute_empty_code(values, os.path.join(folder, EMPTY_CODE))
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            if rel.startswith("azureml_job/"):
                handle.write("# @package _global_\n")
            yaml.safe_dump(values, handle, sort_keys=False)
    # the generated files, then the repository's `.mltrain` nearest the job file (its computes, environments)
    with extra_config_dirs([folder, *plan.config_dirs], generated=folder):
        mltrain_main(mine + user + extra)
    return 0


def _run_command_job(plan: Plan, overrides: List[str], flags: List[str], console: Console) -> int:
    """A command job as one typed request in this process: the job file's values are the request's
    in-memory config (no generated file), its groups and the user's overrides its overrides."""
    from mltrain import backends  # startup
    from mltrain.errors import RunCanceled, RunFailed  # startup
    from mltrain.launch.dryrun import dry_run_text  # startup
    from mltrain.launch.orchestrate import run_all  # startup
    from mltrain.launch.request import JobRequest, freeze_request  # startup
    from mltrain.spec.status import CANCELED, COMPLETED, QUEUED  # startup

    (values,) = plan.files.values()
    values = _absolute_empty_code(values, str(_empty_code(make="--dry-run" not in flags)))
    generated = f"+{GROUP}="
    chosen = [_open_mapping(o) for o in overrides if not o.startswith(generated)]
    if "--detach" in flags:
        chosen.append("run.detach=true")
    # isolate=False: this command runs no other Hydra app, so Hydra's global state needs no putting back
    # (restoring it finds every installed plugin again: 0.1 s)
    job = freeze_request(JobRequest(overrides=tuple(chosen), config_dirs=tuple(plan.config_dirs), config=values),
                         isolate=False)
    if "--dry-run" in flags:
        console.write_line(dry_run_text(job))
        return 0
    backends.get(job.backend).preflight([job])
    result = run_all([job])[0]
    if result.status in (COMPLETED, QUEUED):
        return 0
    # the run's end and its error are printed already, as `mltrain job=command` prints them
    return (RunCanceled if result.status == CANCELED else RunFailed).exit_code


def _sweeps(overrides: List[str]) -> bool:
    from mltrain.launch.request import sweeps_in  # startup

    return bool(sweeps_in(overrides))


def _empty_code(make: bool) -> Path:
    """The source folder of a command job without `code:` (Azure runs it in an empty folder): one empty
    folder under MLTRAIN_HOME, snapshotted like any other (made only for a run: a dry run makes nothing)."""
    from mltrain.config.paths import mltrain_home  # startup

    path = mltrain_home() / "azureml" / EMPTY_CODE
    if make:
        path.mkdir(parents=True, exist_ok=True)
    return path


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _absolute_empty_code(values, empty: str):
    job = values.get("job") if isinstance(values, dict) else None
    if isinstance(job, dict) and job.get("source_directory") == "empty_code":
        job = dict(job, source_directory=empty)
        values = dict(values, job=job)
    return values
