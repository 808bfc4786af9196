"""The `mltrain` command.

`mltrain [overrides]` and `mltrain -m [overrides]` are one command: composed once with Hydra's compose API and
run by mltrain's engines, a sweep wherever an override sweeps (mltrain.command.app). Hydra's own app
runs only what it alone reads (its other flags, another launcher or sweeper). Either way the command line is
read first by Hydra's own parser, so a flag given wrong is the usage error a plain Hydra app gives (one line, exit
status 2), and `--version` names mltrain's version beside Hydra's. `mltrain runs ...` are
management commands and never start Hydra. Nothing here imports torch.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from typing import Any, Callable, List, Optional, Tuple

from mltrain.base.errors import MltrainError, RunCanceled, RunFailed
from mltrain.config.paths import builtin_conf_dir, builtin_search_url, list_options, user_conf_dirs

MANAGEMENT = {"runs": "mltrain.cli.runs", "env": "mltrain.cli.env", "horovod": "mltrain.cli.horovod",
              "models": "mltrain.cli.models", "ui": "mltrain.cli.ui", "job": "mltrain.cli.jobs",
              "endpoints": "mltrain.cli.endpoints"}

HELP = """\
mltrain: Azure ML's PyTorch training, local-first and Slurm-native (Hydra + submitit).

usage: mltrain [-m] [GROUP=OPTION ...] [KEY=VALUE ...] [--dry-run] [--cfg job]
       mltrain pipeline=NAME [--force-rerun] [--detach]     (a pipeline of steps: conf/pipeline/NAME.yaml)
       mltrain runs list | runs show RUN | runs logs RUN [--rank N] | runs status|cancel|resume RUN
       mltrain runs best [SWEEP] [--id|--json]
       mltrain runs plot RUN [RUN ...] [--metric NAME] -o FILE.png | runs compare RUN RUN ... | runs rerun RUN
       mltrain models register NAME --run RUN --path outputs/model | models list [NAME] | models show NAME[:V]
       mltrain models download NAME[:VERSION] DIR [--exist-ok]
       mltrain env list | env show NAME | env save NAME DIR
       mltrain endpoints create NAME | endpoints deploy ENDPOINT --name D --model M --code DIR --scoring-script F
       mltrain endpoints create|deploy --file AZURE.yml | endpoints list|show|logs|invoke|traffic|keys|restart|delete
       mltrain ui [--host H] [--port P]                   (MLflow's UI on the runs and models: needs mltrain[ui])
       mltrain job create --file JOB.yml [--set F=V] [--name N] [--dry-run] [--detach]   (an Azure ML v2 job file)
       mltrain horovod build [--force] | horovod check

A job is composed from these config groups (pick one option each, e.g. model=resnet50):
{groups}
Examples:
  mltrain                                              # train an image classifier on bundled data
  mltrain model=densenet121 trainer.epochs=2 distribution=pytorch distribution.process_count_per_node=2
  mltrain job=script job.source_directory=./my-proj job.script=train.py 'job.arguments=[--lr,0.1]'
  mltrain -m trainer.learning_rate=0.1,0.01 trainer.batch_size=16,32     # a sweep, one run each
  mltrain -m 'trainer.learning_rate=tag(log,interval(1e-4,0.1))' sweep.sampling=random sweep.max_total_runs=8 \
      sweep.primary_metric=top1_accuracy sweep.early_termination.policy=bandit sweep.early_termination.slack_factor=0.1
  mltrain experiment=my_exp                            # an experiment file from ./.mltrain or ./conf
  mltrain ... --dry-run                                # each rank's command and environment; starts nothing

Show the composed config: mltrain --cfg job        Hydra's own flags: mltrain --hydra-help
Runs are kept under $MLTRAIN_HOME/runs (default ~/.mltrain/runs).
"""


def _help_text() -> str:
    dirs = user_conf_dirs() + [builtin_conf_dir()]
    rows = [f"  {group + ':':<14} {', '.join(opts)}" for group, opts in list_options(dirs).items()]
    return HELP.format(groups="\n".join(rows))


def _hydra_app() -> None:
    """Hydra's own app, for what only it runs: its flags (`--info`, `--hydra-help`, `-cd`, ...), another Hydra
    launcher or sweeper, logging or callbacks. Its sweeper plugin hands the `mltrain` config back to mltrain's
    engines (launchers/hydra_plugins/mltrain_launcher/sweeper.py)."""
    import hydra  # startup

    from mltrain.config import schema_store  # noqa: F401  (registers the typed schemas)  # startup

    @hydra.main(config_path=builtin_search_url(), config_name="mltrain", version_base="1.3")
    def _task(cfg) -> None:  # pragma: no cover - the launcher plugin runs jobs, not this function
        raise RuntimeError("mltrain jobs run through the mltrain launcher")

    _task()


def _rewrite_argv(argv: List[str]) -> List[str]:
    """--dry-run and --detach become overrides, appended last: Hydra's parser takes overrides in one
    run, so one left before `-m` would make it refuse those after."""
    from mltrain.config.sections import open_mapping, open_sections  # startup

    flags = FLAG_OVERRIDES
    return open_sections([open_mapping(a) for a in argv if a not in flags]) + [flags[a] for a in argv if a in flags]


#: mltrain's own flags, each an override (mltrain._rewrite_argv)
FLAG_OVERRIDES = {"--dry-run": "dry_run=true", "--detach": "run.detach=true", "--force-rerun": "pipeline.force_rerun=true"}


def main(argv: Optional[List[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in MANAGEMENT:
        # `mltrain runs list | head -1`: end quietly when the reader goes away, as Unix tools do. Only
        # here: a driver killed by SIGPIPE would leave its ranks running.
        if argv[0] != "job":  # `job create` becomes a driver below, which must outlive its reader
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)

        command = importlib.import_module(MANAGEMENT[argv[0]])
        _exit_as_runs_ended(lambda: sys.exit(command.main(argv[1:])))
    if argv and argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(_help_text())
        return
    _exit_as_runs_ended(lambda: launch_argv(argv))


def _exit_as_runs_ended(command: Callable[[], None]) -> None:
    """A command's mistake is its one line; runs that ended Failed or Canceled (a sweep or pipeline of `mltrain
    -m`, `job create`, `runs resume SWEEP`) exit with their status, their end and summary printed already."""
    try:
        command()
    except (RunFailed, RunCanceled) as exc:
        sys.exit(exc.exit_code)
    except MltrainError as exc:
        _die(str(exc), exc.exit_code)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # A full disk is the machine's state, not mltrain's defect: one line, and how to go on (chaos seed 14).
        where = f" writing {exc.filename}" if exc.filename else ""
        _die(f"no space left on device{where}; make room, then `mltrain runs resume` the run or sweep", 1)


def launch_argv(argv: List[str]) -> None:
    """`mltrain [-m] overrides...` in this process: the command composed with Hydra's compose API and run by
    mltrain's engines (mltrain.command.app). Every mistake is raised as one MltrainError carrying the one
    line to print (RunFailed/RunCanceled when runs ended so; their summary is printed)."""
    for arg in argv:
        if arg.startswith("="):  # Hydra's parser takes it and then fails deep inside with a traceback
            raise MltrainError(f"cannot parse override '{arg}': the key before '=' is missing")
    _hydra_args([a for a in argv if a not in FLAG_OVERRIDES])  # its usage errors and --version, before anything
    from mltrain.command.app import HydraAppNeeded, run_app, show_config  # startup
    from mltrain.launch.request import Request  # startup

    command = _command_line(argv)
    if command is not None:
        overrides, show = command
        request = Request(overrides=tuple(_rewrite_argv(overrides)))
        try:
            if show is None:
                run_app(request, isolate=False)  # the command runs nothing else
            else:
                sys.stdout.write(show_config(request, *show, isolate=False))
            return
        except HydraAppNeeded:
            pass
    _run_hydra_app(argv)


#: Hydra's flags that `mltrain` takes itself; any other is Hydra's app's to read (mltrain._hydra_app)
_SHOW_FLAGS = {"--cfg": "part", "-c": "part", "--package": "package", "-p": "package"}


def _command_line(argv: List[str]) -> Optional[Tuple[List[str], Optional[Tuple[str, Optional[str], bool]]]]:
    """The overrides and what `--cfg` asks to show ((part, package, resolve), or None to run), or None where
    Hydra's own app must read the command line."""
    overrides: List[str] = []
    shown: dict = {"part": None, "package": None, "resolve": False}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if arg in ("-m", "--multirun"):  # every mltrain command sweeps what its overrides sweep
            continue
        if arg == "--resolve":
            shown["resolve"] = True
        elif name in _SHOW_FLAGS:
            shown[_SHOW_FLAGS[name]] = value if eq else next(args, None)
        elif arg.startswith("-") and arg not in FLAG_OVERRIDES:
            return None
        elif arg.startswith("hydra/") and not arg.startswith(("hydra/launcher=", "hydra/sweeper=")):
            return None  # Hydra's logging and callbacks are set up by its app
        else:
            overrides.append(arg)
    if shown["part"] is None:
        if shown["package"] is not None or shown["resolve"]:
            return None
        return overrides, None
    if shown["part"] not in ("job", "hydra", "all"):
        return None
    return overrides, (shown["part"], shown["package"], shown["resolve"])


def _hydra_args(argv: List[str]) -> Tuple[argparse.Namespace, List[str]]:
    """argv read by Hydra's own parser, as a plain `@hydra.main` app reads it, and what it leaves over (the
    overrides after a flag, `a=1 -m b=2`, which `mltrain` takes). Its usage error (`--cfg` with no value, a choice
    it does not know) is raised as one line, exit status 2 as argparse's: argparse prints its whole usage first,
    and `mltrain --cfg` with no value must not fall through to running the main job. `--version` names mltrain's
    version, Hydra's beside it."""
    from mltrain.config.hydra_internals import args_parser  # startup

    # Hydra's parser as the parent of mltrain's: its errors raised (argparse.ArgumentError), not printed with the
    # usage, and mltrain's --version in place of Hydra's
    parser = argparse.ArgumentParser(prog="mltrain", parents=[args_parser()], add_help=False, exit_on_error=False,
                                     conflict_handler="resolve")
    parser.add_argument("--version", action=_Version)
    try:
        return parser.parse_known_args(argv)
    except argparse.ArgumentError as exc:
        raise MltrainError(str(exc)) from None


class _Version(argparse.Action):
    """`mltrain --version`: mltrain's version and Hydra's, read when asked (importlib.metadata would cost every
    command about 10 ms)."""

    def __init__(self, option_strings: List[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0,
                         help="Show mltrain's version (and Hydra's) and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        from importlib.metadata import version  # startup

        import hydra  # startup

        sys.stdout.write(f"mltrain {version('mltrain')} (Hydra {hydra.__version__})\n")
        parser.exit()


#: Hydra's app's shell-completion subcommands (`mltrain --shell-completion install=bash`)
_COMPLETION = ("install", "uninstall", "query")


def _check_hydra_app_args(argv: List[str]) -> None:
    """The mistakes Hydra's app would raise as a ValueError, with its traceback (mltrain lets Hydra's exceptions
    through to print them in one line), checked before it starts and refused in one line, as usage errors."""
    args, extra = _hydra_args(argv)
    if extra:  # what Hydra's parse_args refuses after its parse_known_args
        raise MltrainError(f"unrecognized arguments: {' '.join(extra)}")
    if args.help or args.experimental_rerun is not None:
        return
    if args.resolve and args.cfg is None:
        raise MltrainError("--resolve can only be used with --cfg or --help")
    if args.hydra_help:
        return
    if args.run + (args.cfg is not None) + args.multirun + args.shell_completion + (args.info is not None) > 1:
        raise MltrainError("only one of --run, --multirun, --cfg, --info and --shell-completion can be given")
    chosen = [o.split("=", 1)[0] for o in args.overrides if o.split("=", 1)[0] in _COMPLETION]
    if args.shell_completion and len(chosen) != 1:
        raise MltrainError("--shell-completion needs one of install=SHELL, uninstall=SHELL or query=SHELL "
                           "(e.g. `mltrain --shell-completion install=bash`)")


def _run_hydra_app(argv: List[str]) -> None:
    rewritten = _rewrite_argv(argv)
    _check_hydra_app_args(rewritten)
    sys.argv = [sys.argv[0] if sys.argv else "mltrain"] + rewritten
    # Let Hydra's exceptions reach us: Hydra would print several lines and a hint; we print one.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    from mltrain.command.app import one_line_errors  # startup

    with one_line_errors():
        _hydra_app()


def entry() -> None:
    """The `mltrain` command: main(), then Python's own exit work (threads joined, atexit functions,
    stdio flushed) without the teardown of every module Hydra, OmegaConf and submitit loaded, which cost
    0.1-0.2 s at the end of every command here (mltrain.ranks.script_main.finish)."""
    from mltrain.ranks.script_main import exit_code_of, finish  # startup

    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exit_code_of(exc)
    except KeyboardInterrupt:  # Ctrl-C before a command took it over (while Python imports Hydra): one line
        sys.stderr.write("mltrain: interrupted\n")
        code = 130
    finish(code, collect=False)


def _die(message: str, code: int) -> None:
    sys.stderr.write(f"mltrain: error: {message}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
