"""Every use mltrain makes of submitit's internals, in one place, each with why; nothing else in mltrain touches a
private name of submitit (tests/unit/test_fences.py holds that). Checked against submitit 1.5.4.

- `valid_parameters`: the parameter names AutoExecutor and SlurmExecutor accept (their `_valid_parameters()`).
  submitit refuses an unknown one only by saying the `slurm_` prefix is missing; mltrain names the closest
  valid one and lists them all (mltrain.backends.slurm.submission.submitit_names). No public list exists.
- `offline`: SlurmExecutor's constructor refuses to run where `srun` is not on PATH (its `affinity()` classmethod
  is -1 there), but checking the parameters and writing the batch script need no cluster, and a dry run on a
  laptop must still show the script. While the executor is built, `affinity` (a public classmethod) answers 2,
  as it does on a cluster; it is put back at once. AutoExecutor builds its SlurmExecutor itself from submitit's
  executor registry, so a subclass cannot be handed in. Only where srun is absent, where nothing is submitted.
- `sbatch_text`: the batch script the executor would submit (`_make_submission_file_text` of the SlurmExecutor
  behind AutoExecutor's `_executor`, with its `_submitit_command_str`). submitit writes it only while submitting;
  the dry run prints exactly what a submission writes (a golden file holds it: tests/data/golden/sbatch_2x2.sh).
  Owning the text instead (submitit's `_make_sbatch_string`, about 140 lines with its helpers) would print a copy
  of what submitit really submits, which can drift from it: the real submission stays submitit's.
- `run_task_without_numpy`: each Slurm task's first step (mltrain.backends.slurm.task_main). submitit's task
  entry (`submitit.core.submission`) imports numpy "before loading the pickle, to avoid unexpected interactions",
  inside `try: ... except ImportError`; with `sys.modules["numpy"] = None` that import fails as it allows, and
  0.1 s of every task's start is saved (mltrain's pickled jobs hold no numpy objects; one that did still loads,
  numpy being imported by the unpickling then). numpy is importable again before the job runs.

This module imports only the standard library at its top: task_main loads it by its path, before anything of
mltrain is imported, and the driver imports submitit only where a Slurm job is built.
"""
from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Iterator, Set, Tuple

if TYPE_CHECKING:
    from submitit import AutoExecutor

CHECKED_AGAINST = {"submitit": "1.5.4"}


def valid_parameters() -> Tuple[Set[str], Set[str]]:
    """(AutoExecutor's generic parameter names, SlurmExecutor's own, without their `slurm_` prefix)."""
    from submitit.auto.auto import AutoExecutor  # heavy
    from submitit.slurm.slurm import SlurmExecutor  # heavy

    return AutoExecutor._valid_parameters(), SlurmExecutor._valid_parameters()


@contextlib.contextmanager
def offline() -> Iterator[None]:
    """Inside this block a SlurmExecutor can be built where srun is not on PATH (not thread-safe: only where
    there is no Slurm, so nothing is submitted from another thread meanwhile)."""
    from submitit.slurm.slurm import SlurmExecutor  # heavy

    original = SlurmExecutor.__dict__["affinity"]
    SlurmExecutor.affinity = classmethod(lambda cls: 2)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        SlurmExecutor.affinity = original  # type: ignore[method-assign]


def sbatch_text(executor: AutoExecutor) -> str:
    """The batch script this executor (cluster="slurm") submits, with `DRYRUN` where submitit puts a job's uid."""
    from submitit.slurm.slurm import SlurmExecutor  # heavy

    inner = executor._executor  # the SlurmExecutor behind AutoExecutor: it owns the script template
    assert isinstance(inner, SlurmExecutor)  # what cluster="slurm" builds; AutoExecutor types it as any Executor
    return str(inner._make_submission_file_text(inner._submitit_command_str, uid="DRYRUN"))


def run_task_without_numpy(folder: str) -> None:
    """submitit's task entry for the job pickled in `folder`, its numpy import skipped (see above)."""
    sys.modules["numpy"] = None  # type: ignore[assignment]  # submitit's `import numpy` then fails, as it allows
    try:
        from submitit.core.submission import process_job  # heavy
    finally:
        del sys.modules["numpy"]  # the job itself may import numpy as usual
    process_job(folder)

