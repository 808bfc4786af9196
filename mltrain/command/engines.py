"""Which engine runs a composed command, and the folder every command of several runs writes first.

    run_command(composer, arguments)

`composer` holds the command's composed config (mltrain.command.app composes it with Hydra's compose
API; where Hydra's own app runs `mltrain`, its sweeper plugin hands over the config Hydra composed), `arguments`
the command's overrides, sweeps included. A pipeline (`pipeline=NAME`: mltrain.pipelines) and a HyperDrive sweep
(any `sweep.*` key: mltrain.sweeps) are engines of their own; anything else is a run, or a sweep over values
expanded here as Hydra's basic sweeper expands one (its grammar, its order, `hydra.sweeper.params` first), with
Hydra's public override parser, and run by mltrain.launch.members.

The sweep folder (`hydra.sweep.dir`) is made first, so that a run.root that cannot exist is one line naming
it, and removed again when nothing started (a refusal, a dry run) or the command was one lone run.
"""
from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any, Dict, List, Sequence

from omegaconf import OmegaConf

from mltrain.base.errors import ConfigError, MltrainError, one_line
from mltrain.launch import nesting
from mltrain.launch.composer import Composer


def run_command(composer: Composer, arguments: Sequence[str]) -> None:
    """Run the command to its end (or until queued, with `run.detach=true`). Raises RunFailed or RunCanceled
    when its runs ended so (their summary printed), MltrainError for a refusal."""
    from mltrain import pipelines, sweeps  # startup

    config = composer.config
    arguments = list(arguments)
    if not OmegaConf.select(config, "dry_run", default=False):
        nesting.check()  # the `mltrain` command run by a job's own code (mltrain.launch.nesting)
    pipelines.refuse_sweep(arguments)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    existing = next(p for p in (sweep_dir, *sweep_dir.parents) if p.exists())
    single = False
    try:
        make_sweep_dir(sweep_dir, Path(str(config.run.root)))
        if pipelines.wanted(config):
            pipelines.run(composer, arguments)
            return
        if sweeps.wanted(config):
            sweeps.run(composer, arguments)
            return
        from mltrain.launch.members import launch_members  # startup

        job_overrides = expand(config, arguments, composer.bases)
        single = len(job_overrides) == 1
        if not single:  # as Hydra's basic sweeper leaves it: the command's config, read again by nothing here
            OmegaConf.save(config, sweep_dir / "multirun.yaml")
        launch_members(composer, job_overrides, single=single)
    finally:
        if sweep_dir != existing and not composer.started:
            top = next(p for p in (sweep_dir, *sweep_dir.parents) if p.parent == existing)
            shutil.rmtree(top, ignore_errors=True)
        elif sweep_dir != existing and single:
            # the run itself may live beside it: remove the sweep folder and only the parents left empty
            shutil.rmtree(sweep_dir, ignore_errors=True)
            for parent in sweep_dir.parents:
                if parent == existing or any(parent.iterdir()):
                    break
                parent.rmdir()


def several_runs(composer: Composer, arguments: Sequence[str]) -> bool:
    """Whether the command makes more than one run: a pipeline, a HyperDrive sweep, or a sweep over values."""
    from mltrain import pipelines, sweeps  # startup

    config = composer.config
    return bool(pipelines.wanted(config) or sweeps.wanted(config) or len(expand(config, arguments, composer.bases)) > 1)


def expand(config: Any, arguments: Sequence[str], bases: Dict[Any, Any]) -> List[List[str]]:
    """Each member's overrides: the cartesian product of the swept values, in the order Hydra's basic sweeper
    gives (`hydra.sweeper.params` first, then the command line; a key given twice keeps its first place and its
    last value). `bases`: the command's Composer's, holding its overrides as they were parsed."""
    from mltrain.config.compose import parse_overrides  # startup

    params = OmegaConf.select(config, "hydra.sweeper.params", default=None) or {}
    lines = [f"{key}={value}" for key, value in params.items()] + list(arguments)
    try:
        parsed = parse_overrides(lines, bases)
    except Exception as exc:  # noqa: BLE001 - Hydra's parse errors are several lines
        raise MltrainError(one_line(exc)) from None
    chosen: Dict[str, List[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        if not override.is_sweep_override():
            chosen[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            chosen[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise ConfigError(override.key_or_group, f"'{override.input_line}' is sampled, not listed: only a "
                              "HyperDrive sweep samples (set sweep.sampling=random, or any other sweep.* key)")
    return [list(member) for member in itertools.product(*chosen.values())]


def make_sweep_dir(sweep_dir: Path, run_root: Path) -> None:
    """The folder every command writes first, made here so that a run.root that cannot exist (under /proc,
    below a file, read-only) is one line naming it, dry run or not. The caller removes it if nothing started."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        key, root = ("run.root", run_root) if run_root in sweep_dir.parents else ("hydra.sweep.dir", sweep_dir)
        failed = f"{exc.filename}: " if exc.filename and str(exc.filename) != str(root) else ""
        raise ConfigError(key, f"cannot create {root} ({failed}{exc.strerror})") from None
