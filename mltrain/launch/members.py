"""The engine of a run and of a sweep over values: compose every member, freeze it, then print the dry run or
create and run them all, and summarize.

`mltrain a=1` is a sweep of one member, `mltrain -m a=1,2` of two; mltrain.command.app comes here for
both, and the Hydra launcher plugin (mltrain.launch.hydra_adapter) for a plain Hydra app's jobs. Every member
is composed and frozen before the first one starts, so a bad value in the third member stops the sweep before
anything runs. A detached, packed sweep's later members are made by their Slurm workers instead
(mltrain.launch.deferred).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig

from mltrain import backends
from mltrain.base.errors import RunCanceled, RunFailed
from mltrain.config.compose import is_mltrain_config
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED
from mltrain.launch.composer import Composer
from mltrain.launch.dryrun import dry_run_text
from mltrain.launch.orchestrate import RunResult, print_summary, run_all, summary_rows, write_sweep_summary
from mltrain.runs.console import Console


@dataclass
class Launched:
    """What the members came to. `results`: one per member made here; `rows`: the summary rows of a deferred
    sweep instead (its later members are made by their workers: mltrain.launch.deferred)."""

    configs: List[DictConfig]
    results: List[RunResult] = field(default_factory=list)
    rows: Optional[List[Dict[str, Any]]] = None


def launch_members(composer: Composer, job_overrides: Sequence[Sequence[str]], initial_job_idx: int = 0,
                   single: bool = False, payloads: Optional[Any] = None) -> Launched:
    """Run every member (`job_overrides`, one list of overrides each) to its end, or until queued when detached.
    `single`: the command is one lone run, not a sweep (no sweep folder is named in its record). `payloads`:
    for a plain Hydra app, a function giving each member's pickled task from the composed configs
    (mltrain.launch.hydra_app). mltrain's own runs that end Failed or Canceled raise RunFailed/RunCanceled,
    after every member has run and the summary is printed."""
    shapes: Dict[str, Any] = {}  # the first member's frozen shape, which the others are copies of
    configs = composer.compose_many(job_overrides[:1], initial_job_idx)
    jobs = composer.freeze(configs, shapes)
    own = is_mltrain_config(configs[0])
    if len(job_overrides) > 1 and not (own and configs[0].dry_run):
        # A sweep its backend could never hold (more Slurm jobs than the cluster's MaxJobCount) is refused
        # from its first member, before the others are composed (10,000 members took minutes to compose
        # before the one line): members differ in values, so its backend and packing stand for all.
        backends.get(jobs[0].backend).preflight([jobs[0]] * len(job_overrides))
    if len(job_overrides) > 1 and jobs[0].detach:
        from mltrain.launch import deferred  # startup

        if deferred.deferrable(configs[0], jobs[0], job_overrides, composer.bases):  # its workers make the others
            deferred.check_values(configs[0], job_overrides)
            composer.mark_started()
            rows = deferred.launch(configs[0], jobs[0], job_overrides, initial_job_idx, composer.bases, shapes,
                                   composer.runs_root)
            return Launched(configs, rows=rows)
    rest = composer.compose_many(job_overrides[1:], initial_job_idx + 1)
    configs += rest
    jobs += composer.freeze(rest, shapes)
    if any(is_mltrain_config(c) and c.dry_run for c in configs):
        console = Console()
        for job in jobs:
            console.write_line(dry_run_text(job))
        return Launched(configs, [RunResult(j, COMPLETED) for j in jobs])
    for name in sorted({job.backend for job in jobs}):
        backends.get(name).preflight([job for job in jobs if job.backend == name])
    composer.mark_started()  # runs are created from here on (their sweep folder is kept)
    if single:  # a lone run is not a sweep: no sweep folder beside it
        jobs = [dataclasses.replace(jobs[0], sweep_dir=None, sweep_index=None)]
    if not own:
        return Launched(configs, run_all(jobs, payloads(configs) if payloads is not None else None))
    results = run_all(jobs)
    rows = summary_rows(results)
    write_sweep_summary(results[0].job.sweep_dir, rows)
    print_summary(rows, Console())
    # Raised here rather than returned: every member has run and the summary is printed, and a Hydra sweeper
    # would otherwise add its own multi-line report.
    for error, status in ((RunCanceled, CANCELED), (RunFailed, FAILED)):
        bad = [r for r in results if r.status == status]
        if bad:
            raise error(f"{len(bad)} of {len(results)} run(s) {status}: " + ", ".join(r.job.run_id for r in bad))
    return Launched(configs, results)
