"""Jobs submitted from inside jobs: how deep, and by which files (issue 63).

A job's code may submit a job (Azure allows it; a pipeline's sweep step runs `mltrain job create` inside its
step). But a file that submits at module level, without `if __name__ == "__main__":`, submits again in every
step that imports it (an mldesigner component beside its `@dsl.pipeline`): each step's pipeline starts more
steps, without bound. So every rank carries, frozen into its job's environment (mltrain.launch.freeze):

- DEPTH: how many jobs deep it runs (1 in a job submitted from outside any, 2 in a job a rank submitted...);
- FILES: the digests of the files whose code submitted those jobs.

Every way in (mltrain.python_api.api's submit_request and submit_multirun, under the v1 and v2 SDKs and mltrain.submit, whose
entry points look first too; mltrain.command.engines for the `mltrain` command) calls `check` first. A file that submits from inside a job
it submitted itself (its digest among FILES: a copy in a step's code snapshot is the same file) is refused at
once, so the step fails and its pipeline with it; any other submission is refused past MAX_DEPTH. Standard
library only: every submission path imports it.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import sysconfig
from pathlib import Path
from types import FrameType
from typing import Dict, List, Mapping, Optional, Tuple

from mltrain.base.errors import MltrainError

DEPTH = "MLTRAIN_SUBMIT_DEPTH"
FILES = "MLTRAIN_SUBMIT_FILES"
#: The deepest a job may be nested: a user's job (1), a job its code submits (2: a pipeline's sweep step's
#: sweep), and one more of that job's own (3). Deeper is taken as a submission that repeats itself.
MAX_DEPTH = 3
GUARD = 'guard the submission with if __name__ == "__main__":'

_OURS = Path(__file__).resolve().parent.parent  # mltrain's own package: never the file that submits


class NestedSubmission(MltrainError):
    """A submission refused because of where it comes from (its message is the one line)."""


def depth(env: Mapping[str, str] = os.environ) -> int:
    """How many jobs deep a process with this environment runs (0: outside any job)."""
    try:
        return max(0, int(env.get(DEPTH, "0")))
    except ValueError:
        return 0


def files(env: Mapping[str, str] = os.environ) -> List[str]:
    return [f for f in env.get(FILES, "").split(",") if f]


def digest(path: Path) -> Optional[str]:
    try:
        stat = path.stat()
    except OSError:  # a notebook cell's pseudo-file, a file removed since
        return None
    return _digest(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _digest(path: str, mtime_ns: int, size: int) -> Optional[str]:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


@functools.lru_cache(maxsize=1)
def _libraries() -> Tuple[Path, ...]:
    paths = sysconfig.get_paths()
    return (_OURS, *(Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib", "scripts")
                     if k in paths))


@functools.lru_cache(maxsize=1024)
def _users(name: Optional[str]) -> Optional[Path]:
    """The file, if it is a user's: not mltrain's, the standard library's, an installed package's or a script
    installed beside the interpreter (`mltrain`). Cached: a sweep freezes each of its members."""
    if not name or name.startswith("<"):
        return None
    path = Path(name).resolve()
    return None if any(path == s or s in path.parents for s in _libraries()) else path


def submitting_file() -> Optional[Path]:
    """The user's file whose code is submitting: the innermost caller outside mltrain, the standard library and
    installed packages (azure-ai-ml, mldesigner's `execute` that imported it), else the main script if it is
    not one of those. None for the `mltrain` command."""
    frame: Optional[FrameType] = sys._getframe(1)
    while frame is not None:
        found = _users(frame.f_code.co_filename)
        if found is not None:
            return found
        frame = frame.f_back
    return _users(getattr(sys.modules.get("__main__"), "__file__", None))


def job_variables() -> Dict[str, str]:
    """The nesting variables of the ranks of a job submitted now, from this process: one deeper, and this
    process's submitting file added to the files that submitted the jobs around it."""
    chain = files()
    own = submitting_file()
    mark = digest(own) if own is not None else None
    if mark and mark not in chain:
        chain.append(mark)
    out = {DEPTH: str(depth() + 1)}
    if chain:
        out[FILES] = ",".join(chain)
    return out


def driver_env(env: Dict[str, str]) -> Dict[str, str]:
    """`env` for an engine's driver process started for this process's submission (a sweep's or pipeline's,
    which freezes the jobs): this process's submitting file among FILES, as job_variables puts it."""
    variables = job_variables()
    out = dict(env)
    if FILES in variables:
        out[FILES] = variables[FILES]
    return out


def check() -> None:
    """Raise NestedSubmission, the one line, when a submission from this process must not be made."""
    now = depth()
    if now == 0:
        return
    own = submitting_file()
    mark = digest(own) if own is not None else None
    who = own.name if own is not None else "`mltrain " + " ".join(sys.argv[1:]) + "`"
    where = _where()
    if mark is not None and mark in files():
        raise NestedSubmission(f"{who} submits a job from inside {where}, a job {who} submitted itself (a job "
                               f"submitted by a job's own code, nested {now + 1} deep); {GUARD}")
    if now >= MAX_DEPTH:
        hint = f"; {GUARD} if it is not meant to run in the job" if own is not None else ""
        raise NestedSubmission(f"{who} submits a job from inside {where} (a job submitted by a job's own code, "
                               f"nested {now + 1} deep; at most {MAX_DEPTH} are){hint}")


def _where() -> str:
    """`run X's step 'S'` for a pipeline's step, else `run X` (`a job` where the job's program did not pass on
    its run's variables)."""
    run_id = os.environ.get("MLTRAIN_RUN_ID")
    try:
        doc = json.loads((Path(os.environ["MLTRAIN_RUN_DIR"]) / "run.json").read_text(encoding="utf-8"))
        step = doc.get("pipeline_step") or {}
    except (KeyError, OSError, ValueError, AttributeError):
        step = {}
    if step.get("step") and step.get("pipeline_run"):
        return f"run {step['pipeline_run']}'s step '{step['step']}'"
    return f"run {run_id}" if run_id else "a job"


def refuse_in_a_rank() -> None:
    """`check` for the Python API (the SDKs, mltrain.submit), whose caller is a job's own code: on a refusal the
    line on stderr, and the process ends at once (exit status 2). Not an exception: the code around the call is
    the user's, or a library's that imported the user's file (mldesigner's `execute` wraps whatever its import
    raised, SystemExit too, in a traceback of its own), and whatever handled it would go on to the rest of the
    module: another submission, or the step's work. (The error line of the `mltrain` command is the CLI's own.)"""
    try:
        check()
    except NestedSubmission as exc:
        sys.stdout.flush()
        sys.stderr.write(f"mltrain: refused: {exc}\n")
        sys.stderr.flush()
        os._exit(exc.exit_code)
