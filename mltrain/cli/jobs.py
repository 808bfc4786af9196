"""`mltrain job create --file job.yml`: an Azure ML v2 job file run as `az ml job create` runs it.

    mltrain job create --file job.yml [--set FIELD=VALUE ...] [--name N] [--experiment-name E]
                       [--stream | --detach] [--dry-run] [mltrain overrides ...]

The file is read and checked whole (mltrain.azureml) before anything exists. A command job, a sweep or a
pipeline is then what `mltrain [-m]` runs, from typed parts in this process (mltrain.command.app_request): the
file's values are in-memory config options, no generated file. Every override (`compute=slurm`,
`run.root=...`) and flag behaves as it does for `mltrain ...`.
"""
from __future__ import annotations

import sys
from typing import List, Optional

from mltrain.azureml import job_plan
from mltrain.azureml.job_request import Request, config_nodes_of, empty_code
from mltrain.base.errors import MltrainError
from mltrain.cli.main import _open_mapping
from mltrain.command.app_request import AppRequest, run_app
from mltrain.config.sections import open_sections
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
    # One run, a sweep or a pipeline (or a command job swept from the command line, `compute=local,slurm`): what
    # `mltrain [-m]` runs, from typed parts in this process; the file's generated config groups are config
    # nodes held in memory (a sweep writes them into its own folder for `runs resume SWEEP`).
    chosen = open_sections([_open_mapping(o) for o in mine + user])
    chosen += [override for flag, override in (("--dry-run", "dry_run=true"), ("--detach", "run.detach=true"))
               if flag in extra]
    with empty_code(request.dry_run) as empty:
        nodes = config_nodes_of(plan.files, str(empty))
        # isolate=False: this command runs no other Hydra app, so Hydra's global state needs no putting back
        # (restoring it finds every installed plugin again: 0.1 s)
        run_app(AppRequest(overrides=tuple(chosen), config_dirs=tuple(plan.config_dirs), nodes=nodes), isolate=False)
    return 0


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")
