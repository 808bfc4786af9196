"""`mltrain job create --file job.yml`: an Azure ML v2 job file run as `az ml job create` runs it.

    mltrain job create --file job.yml [--set FIELD=VALUE ...] [--name N] [--experiment-name E]
                       [--stream | --detach] [--dry-run] [mltrain overrides ...]

The file is read and checked whole (mltrain.azureml) before anything exists. A command job, a sweep or a
pipeline is then what `mltrain [-m]` runs, from typed parts in this process (mltrain.command.app): the
file's values are in-memory config options, no generated file. Every override (`compute=slurm`,
`run.root=...`) and flag behaves as it does for `mltrain ...`.
"""
from __future__ import annotations

import sys
from typing import List, Optional

from mltrain.azureml.job_create import JobCreate
from mltrain.base.errors import MltrainError
from mltrain.command.job_file import run_job_file

USAGE = ("usage: mltrain job create --file FILE [--set FIELD=VALUE ...] [--name NAME] [--experiment-name NAME] "
         "[--stream|--detach] [--dry-run] [mltrain overrides ...]")


def main(argv: List[str]) -> Optional[int]:

    if not argv or argv[0] in ("-h", "--help"):
        sys.stdout.write(USAGE + "\n")
        return 0
    if argv[0] != "create":
        raise MltrainError(f"unknown job command '{argv[0]}' ({USAGE})")
    request, flags = _parse(argv[1:])
    # this command runs no other Hydra app, so Hydra's global state needs no putting back (restoring it finds
    # every installed plugin again: 0.1 s)
    run_job_file(request, detach="--detach" in flags, isolate=False)
    return 0


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
    request = JobCreate(file=file, sets=tuple(sets), name=name, experiment_name=experiment,
                        overrides=tuple(overrides), dry_run="--dry-run" in flags)
    return request, flags
