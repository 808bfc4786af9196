"""What program each rank runs, by job kind (mltrain.jobspec.kinds), and the checks of that kind.

A rank program is an argv (with $VARS left unexpanded; mltrain.ranks.contract expands them per rank) and a
working directory. Built-in components run as `python -m <module>` and read the frozen config from
$MLTRAIN_RUN_DIR, so every rank, requeue and rerun sees the same values.
"""
from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from mltrain.base.errors import ConfigError
from mltrain.jobspec.kinds import JOB_KINDS, JobKind


@dataclass(frozen=True)
class RankProgram:
    argv: List[str]
    cwd: str
    # The folder copied into <run_dir>/snapshot at submission; the ranks run from that copy.
    snapshot_source: Optional[str] = None


SNAPSHOT = "snapshot"
#: A script runs as `python script_main.py SCRIPT ARGS`: as `python SCRIPT ARGS` would, without the native
#: teardown that can abort a finished rank (mltrain/ranks/script_main.py says why). Run by path, not with
#: -m: an environment's interpreter may not have mltrain installed.
SCRIPT_MAIN = str(Path(__file__).resolve().parent.parent / "ranks" / "script_main.py")


def interpreter(cfg: Any) -> str:
    """The Python that runs the ranks: the environment's interpreter, else this one."""
    return cfg.environment.python.interpreter or sys.executable


def _source_dir(cfg: Any) -> Path:
    src = Path(os.path.expanduser(str(cfg.job.source_directory)))
    if not src.is_dir():
        raise ConfigError("job.source_directory", f"directory '{src}' does not exist")
    return src.resolve()


def _script(cfg: Any, run_dir: str) -> RankProgram:
    src = _source_dir(cfg)
    script = src / str(cfg.job.script)
    if script.is_dir():
        raise ConfigError("job.script", f"'{cfg.job.script}' in '{src}' is a directory; name the script file in it")
    if not script.is_file():
        raise ConfigError("job.script", f"file '{cfg.job.script}' does not exist in '{src}'")
    args = [_argument(a) for a in cfg.job.arguments]
    snap = Path(run_dir) / SNAPSHOT
    return RankProgram([interpreter(cfg), SCRIPT_MAIN, str(snap / str(cfg.job.script)), *args], str(snap), str(src))


def _argument(value: Any) -> str:
    if isinstance(value, (dict, list)) or hasattr(value, "keys"):
        raise ConfigError("job.arguments", f"each argument must be a scalar, got {value!r}")
    return str(value)


def _command(cfg: Any, run_dir: str) -> RankProgram:
    raw = cfg.job.command
    if isinstance(raw, bool):  # `true`/`false` are commands too
        raw = str(raw).lower()
    if not isinstance(raw, (str, int, float)):
        raise ConfigError("job.command", f"must be a command line (a string), got {raw!r}")
    command = str(raw).strip()
    if not command:
        raise ConfigError("job.command", "must not be empty")
    # /bin/sh expands $VARS itself from the rank's environment.
    src = _source_dir(cfg)
    return RankProgram(["/bin/sh", "-c", command], str(Path(run_dir) / SNAPSHOT), str(src))


def _component(cfg: Any, run_dir: str, kind: JobKind) -> RankProgram:
    try:
        module = importlib.import_module(kind.program)
    except ModuleNotFoundError:
        raise ConfigError("job", f"job={kind.name} is not available in this installation", sorted(JOB_KINDS)) from None
    module.validate(cfg)  # data directories, model directories: before anything is queued
    if kind.user_code:  # the user's code beside the component: snapshotted, the ranks start in the copy
        return RankProgram([interpreter(cfg), "-m", kind.program], str(Path(run_dir) / SNAPSHOT), str(_source_dir(cfg)))
    return RankProgram([interpreter(cfg), "-m", kind.program], run_dir)


#: The builders of the user's own programs, by the names mltrain.jobspec.kinds.USER_PROGRAMS gives them.
BUILDERS: Dict[str, Callable[[Any, str], RankProgram]] = {"script": _script, "command": _command}


def rank_program(cfg: Any, run_dir: str) -> RankProgram:
    kind = JOB_KINDS.get(str(cfg.job.kind))
    if kind is None:
        raise ConfigError("job.kind", f"unknown job kind '{cfg.job.kind}'", sorted(JOB_KINDS))
    if kind.builtin:
        return _component(cfg, run_dir, kind)
    return BUILDERS[kind.program](cfg, run_dir)
