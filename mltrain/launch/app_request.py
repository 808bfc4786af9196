"""`mltrain -m OVERRIDES` from typed parts, in this process: what a front end asks for when its job is a
sweep or a pipeline (a v2 sweep or pipeline file, a resumed sweep's driver).

    run_app(AppRequest(overrides=("pipeline=train_eval", "compute=slurm"), config_dirs=(".mltrain",),
                       nodes=(ConfigNode("pipeline", "train_eval", {...}),)))

It runs what the `mltrain` command's Hydra app runs, without argv: Hydra's app object made as `@hydra.main`
makes it (mltrain.config.hydra_internals.main_hydra), its multirun called with the overrides, so the sweep or
pipeline goes through mltrain's Hydra sweeper and engines (mltrain.sweeps, mltrain.pipelines) exactly as from
the command line; `--dry-run` and `--detach` are the overrides `dry_run=true` and `run.detach=true`. Config
folders and in-memory config nodes reach Hydra through the composition's own context (extra_config_dirs,
config_nodes): no temporary file, no environment variable, no change of directory. A mistake raises one
MltrainError carrying the CLI's one line (`one_line_errors`, which the CLI uses too).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator, Tuple

from mltrain.config.memory_nodes import ConfigNode, config_nodes
from mltrain.config.paths import builtin_search_url, extra_config_dirs
from mltrain.errors import MltrainError

#: `hydra.job.name` of the `mltrain` command, whose `@hydra.main` is in mltrain/cli/main.py: the same here.
TASK_NAME = "main"
PRIMARY_CONFIG = "mltrain"
#: `@hydra.main(version_base=...)` of the `mltrain` command
VERSION_BASE = "1.3"


@dataclass(frozen=True)
class AppRequest:
    """A sweep or a pipeline. `overrides`: Hydra's override strings, sweeps allowed (`a=1,2`, `pipeline=NAME`);
    `config_dirs`: folders of config groups searched first; `nodes`: config options held in memory."""

    overrides: Tuple[str, ...]
    config_dirs: Tuple[str, ...] = ()
    nodes: Tuple[ConfigNode, ...] = ()


def run_app(request: AppRequest, isolate: bool = True) -> None:
    """Run the sweep or pipeline to its end (or until it is queued, with `run.detach=true`). Raises RunFailed
    or RunCanceled when its runs ended so (their summary printed), MltrainError for a refusal. `isolate`:
    Hydra's global state put back as the caller had it (False where no other Hydra app runs in the process)."""
    from hydra.core.global_hydra import GlobalHydra  # startup

    from mltrain.config import schema_store  # noqa: F401  (registers the typed schemas)  # startup
    from mltrain.config.hydra_internals import main_hydra, restore_singletons, saved_singletons  # startup

    saved = saved_singletons() if isolate else None
    if GlobalHydra.instance().is_initialized():
        GlobalHydra.instance().clear()
    try:
        # the search path and the ConfigStore are read while Hydra composes, inside these blocks
        with one_line_errors(), extra_config_dirs(request.config_dirs), config_nodes(request.nodes):
            app = main_hydra(TASK_NAME, builtin_search_url(), VERSION_BASE)
            app.multirun(config_name=PRIMARY_CONFIG, task_function=_task, overrides=list(request.overrides))
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            restore_singletons(saved)


def _task(cfg: Any) -> None:  # pragma: no cover - the launcher plugin and the engines run jobs, not this
    raise RuntimeError("mltrain jobs run through the mltrain launcher")


@contextlib.contextmanager
def one_line_errors() -> Iterator[None]:
    """Inside this block, a mistake in the user's configs or overrides is raised as one MltrainError line
    (mltrain.config.messages.user_error) and Ctrl-C as `canceled`, exit status 130 as a shell reports SIGINT;
    anything else (a defect) goes on as it is, to be seen. The CLI's Hydra app and run_app both run in it."""
    try:
        yield
    except KeyboardInterrupt:
        canceled = MltrainError("canceled")
        canceled.exit_code = 130
        raise canceled from None
    except Exception as exc:
        # read only when something went wrong
        from mltrain.config.messages import user_error  # startup

        error = user_error(exc)
        if error is None or error is exc:
            raise
        raise error from None
