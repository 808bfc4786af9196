"""A command from typed parts, in this process: what `mltrain [-m] OVERRIDES` runs, and what a front end asks
for when its job is a run, a sweep or a pipeline (a v2 job file, a resumed sweep's driver, the Python API's
detached driver).

    run_app(Request(overrides=("pipeline=train_eval", "compute=slurm"), config_dirs=(".mltrain",),
                    nodes=(ConfigNode("pipeline", "train_eval", {...}),)))

Hydra is a library here. The command's config is composed once with Hydra's public compose API
(`initialize_config_module` + `compose`) from the overrides that do not sweep; the engines
(mltrain.command.engines) compose each member or step from it through the same loader
(`GlobalHydra.instance().config_loader()`), and expand sweeps with Hydra's public override parser. No argv, no
Hydra app, no sweeper or launcher plugin on this path. Config folders and in-memory config nodes reach Hydra
through the composition's own context (extra_config_dirs, config_nodes): no temporary file, no environment
variable, no change of directory. `--dry-run` and `--detach` are the overrides `dry_run=true` and
`run.detach=true`. A mistake raises one MltrainError carrying the CLI's one line (`one_line_errors`).

A command that chooses another Hydra launcher or sweeper (`hydra/sweeper=optuna`), or Hydra callbacks, needs
Hydra's own app: HydraAppNeeded says so, and the `mltrain` command runs it that way (mltrain.cli.main).
"""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

from mltrain.base.errors import MltrainError
from mltrain.config.hydra_session import hydra_session
from mltrain.launch.request import Request

#: the Hydra plugins the `mltrain` config runs on; another choice is run by Hydra's own app
OWN_PLUGINS = {"hydra/launcher": ("mltrain", "mltrain_slurm"), "hydra/sweeper": ("mltrain",)}


class HydraAppNeeded(MltrainError):
    """The command chose a Hydra plugin or callback only Hydra's own app runs."""


def run_app(request: Request, isolate: bool = True) -> None:
    """Run the command to its end (or until it is queued, with `run.detach=true`). Raises RunFailed
    or RunCanceled when its runs ended so (their summary printed), MltrainError for a refusal. `isolate`:
    Hydra's global state put back as the caller had it (False where no other Hydra app runs in the process)."""
    from mltrain.command import remote_multirun  # startup
    from mltrain.command.engines import run_command, several_runs  # startup

    with composed(request, isolate) as composer:
        arguments = list(request.all_overrides())
        remote = remote_multirun.target(composer, arguments, lambda: several_runs(composer, arguments))
        if remote is not None:
            remote_multirun.run_there(request, composer, remote)  # its driver runs on the cluster (issue 65)
            return
        run_command(composer, arguments)


def show_config(request: Request, part: str = "job", package: Optional[str] = None, resolve: bool = False,
                isolate: bool = True) -> str:
    """The composed config as `mltrain --cfg job|hydra|all [-p PACKAGE] [--resolve]` prints it (Hydra's own
    `--cfg`: one run's config, so a sweep is refused as there)."""
    from hydra.core.hydra_config import HydraConfig  # startup
    from omegaconf import Container, OmegaConf, flag_override  # startup

    with one_line_errors(), hydra_session(request.config_dirs, request.all_nodes(), isolate) as compose:
        cfg = compose(list(request.all_overrides()))
        HydraConfig.instance().set_config(cfg)  # `${hydra:...}` resolves with --resolve, as under Hydra's --cfg
        with _writable(cfg):
            if part == "job":
                del cfg["hydra"]
            elif part == "hydra":
                for key in [k for k in cfg.keys() if k != "hydra"]:
                    del cfg[key]
                with flag_override(cfg.hydra, ["struct", "readonly"], False):  # a typed node: its own flags
                    del cfg.hydra["hydra_help"]  # as Hydra's own --cfg hydra leaves them out
                    del cfg.hydra["help"]
        chosen = cfg if package in (None, "_global_") else OmegaConf.select(cfg, str(package))
        if chosen is None:
            raise MltrainError(f"package '{package}' not found in config")
        if not isinstance(chosen, Container):
            return f"{chosen}\n"
        if resolve:
            OmegaConf.resolve(chosen)
        header = f"# @package {package}\n" if package not in (None, "_global_") else ""
        return header + OmegaConf.to_yaml(chosen)


@contextlib.contextmanager
def composed(request: Request, isolate: bool = True) -> Iterator[Any]:
    """A Composer holding the command's config, composed from its overrides that do not sweep; Hydra stays
    initialized inside the block, for the engines' own compositions."""
    from mltrain.config.compose import parse_overrides  # startup
    from mltrain.launch.composer import DEFAULT_RUNS_ROOT, Composer  # startup

    with one_line_errors(), hydra_session(request.config_dirs, request.all_nodes(), isolate) as compose:
        overrides = list(request.all_overrides())
        bases: Dict[Any, Any] = {}  # the command's overrides parsed once, here, for every composition and expansion after
        # What the command's own config is composed from: the overrides that do not sweep (Hydra's multirun
        # composes it the same way, leaving sweeps to its sweeper)
        config = compose([str(o.input_line) for o in parse_overrides(overrides, bases) if not o.is_sweep_override()])
        _check_plugins(config)
        with _writable(config):  # as Hydra's multirun records them: the sweeps too (a resumed sweep reads them)
            config.hydra.overrides.task = overrides
        runs_root = str(config.hydra.launcher.get("runs_root") or DEFAULT_RUNS_ROOT)
        yield Composer(config, compose.loader, runs_root, bases=bases)


def _check_plugins(config: Any) -> None:
    choices = config.hydra.runtime.choices
    for group, ours in OWN_PLUGINS.items():
        if choices.get(group) not in ours:
            raise HydraAppNeeded(f"{group}={choices.get(group)} is run by Hydra's own app: use the `mltrain` command")
    if config.hydra.get("callbacks"):
        raise HydraAppNeeded("hydra.callbacks are called by Hydra's own app: use the `mltrain` command")


@contextlib.contextmanager
def _writable(cfg: Any) -> Iterator[None]:
    from omegaconf import open_dict, read_write  # startup

    with read_write(cfg), open_dict(cfg):
        yield


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
