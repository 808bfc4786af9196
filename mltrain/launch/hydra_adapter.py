"""The body of the Hydra launcher plugin (launchers/hydra_plugins/mltrain_launcher): compose every
member, freeze it, then print the dry run or run them, and answer Hydra with JobReturns."""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional, Sequence

from hydra.core.utils import JobReturn, JobStatus, setup_globals
from omegaconf import DictConfig, OmegaConf

from mltrain import backends
from mltrain.config.compose import compose_members, is_mltrain_config
from mltrain.errors import RunCanceled, RunFailed
from mltrain.launch import hydra_app
from mltrain.launch.dryrun import dry_run_text
from mltrain.launch.freeze import freeze_member
from mltrain.launch.orchestrate import RunResult, print_summary, run_all, summary_rows, write_sweep_summary
from mltrain.runs.console import Console
from mltrain.spec.job import FrozenJob
from mltrain.spec.status import CANCELED, COMPLETED, FAILED, QUEUED


def freeze_members(configs: List[DictConfig], runs_root: str, app_compute=None,
                   shapes: Optional[dict] = None) -> List[FrozenJob]:
    jobs = []
    # the first member's config, which later members are copies of (freeze._config_of); across calls when given
    shapes = {} if shapes is None else shapes
    for cfg in configs:
        jobs.append(freeze_member(cfg, runs_root, sweep_index=int(cfg.hydra.job.num), app_compute=app_compute,
                                  shapes=shapes))
    return jobs


def app_compute(params: dict):
    """A plain Hydra app's compute settings: `hydra/launcher=mltrain_slurm` has them at the top
    level (as hydra-submitit-launcher), `hydra/launcher=mltrain` under `compute`."""
    compute = params.get("compute")
    if compute is None and "kind" in params:
        compute = {k: v for k, v in params.items() if k not in ("_target_", "runs_root")}
    if OmegaConf.is_config(compute):
        compute = OmegaConf.to_container(compute, resolve=True)
    if not compute:
        return None
    # Hydra hands nested values (srun_args, additional_parameters) over as OmegaConf containers.
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v for k, v in compute.items()}


def job_return(cfg: DictConfig, result: RunResult):
    ret = JobReturn(
        overrides=list(result.job.overrides),
        # The frozen, resolved config as plain data: copying each member's DictConfig again would
        # cost more than everything else a 100-member sweep does.
        cfg=result.job.config,
        hydra_cfg=cfg,
        working_dir=result.run_dir,
        task_name=str(cfg.hydra.job.name),
    )
    if result.status in (COMPLETED, QUEUED):  # QUEUED: detached, still on the cluster
        ret.status = JobStatus.COMPLETED
        ret.return_value = {"run_id": result.job.run_id, "run_dir": result.run_dir, "status": result.status}
    else:
        ret.status = JobStatus.FAILED
        error = RunCanceled if result.status == CANCELED else RunFailed
        ret.return_value = error(f"run {result.job.run_id} {result.status}: {result.error or ''}".strip())
    return ret


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """The body of MltrainLauncher.launch()."""
    setup_globals()
    runs_root = str(launcher.params.get("runs_root") or "~/.mltrain/runs")
    compute = app_compute(launcher.params)
    bases: dict = {}  # the members' shared compositions, and their shared shape, across the calls below
    shapes: dict = {}
    configs = compose_members(launcher, job_overrides[:1], initial_job_idx, bases)
    jobs = freeze_members(configs, runs_root, compute, shapes)
    if len(job_overrides) > 1 and not (is_mltrain_config(configs[0]) and configs[0].dry_run):
        # A sweep its backend could never hold (more Slurm jobs than the cluster's MaxJobCount) is refused
        # from its first member, before the others are composed (10,000 members took minutes to compose
        # before the one line): members differ in values, so its backend and packing stand for all.
        backends.get(jobs[0].backend).preflight([jobs[0]] * len(job_overrides))
    if len(job_overrides) > 1 and jobs[0].detach:
        from mltrain.launch import deferred  # startup

        if deferred.deferrable(configs[0], jobs[0], job_overrides, bases):  # its workers make the other members
            deferred.check_values(configs[0], job_overrides)
            launcher.started, launcher.single_run = True, False
            return deferred.launch(configs[0], jobs[0], job_overrides, initial_job_idx, bases, shapes, runs_root)
    rest = compose_members(launcher, job_overrides[1:], initial_job_idx + 1, bases)
    configs += rest
    jobs += freeze_members(rest, runs_root, compute, shapes)
    if any(is_mltrain_config(c) and c.dry_run for c in configs):
        console = Console()
        for job in jobs:
            console.write_line(dry_run_text(job))
        return [job_return(c, RunResult(j, COMPLETED)) for c, j in zip(configs, jobs)]
    for name in sorted({job.backend for job in jobs}):
        backends.get(name).preflight([job for job in jobs if job.backend == name])
    launcher.started = True  # runs are created from here on (mltrain's sweeper keeps their sweep folder)
    # A lone run is not a sweep: no sweep folder beside it (mltrain's sweeper removes the one Hydra made).
    launcher.single_run = initial_job_idx == 0 and len(jobs) == 1 and is_mltrain_config(configs[0])
    if launcher.single_run:
        jobs = [dataclasses.replace(jobs[0], sweep_dir=None, sweep_index=None)]
    if not is_mltrain_config(configs[0]):
        results = run_all(jobs, hydra_app.payloads(launcher, configs))
        return hydra_app.job_returns(configs, results)
    results = run_all(jobs)
    rows = summary_rows(results)
    write_sweep_summary(results[0].job.sweep_dir, rows)
    print_summary(rows, Console())
    # Raised here rather than left in a FAILED JobReturn: every member has run and the summary is
    # printed, and Hydra's sweeper would otherwise add its own multi-line report.
    for error, status in ((RunCanceled, CANCELED), (RunFailed, FAILED)):
        bad = [r for r in results if r.status == status]
        if bad:
            raise error(f"{len(bad)} of {len(results)} run(s) {status}: " + ", ".join(r.job.run_id for r in bad))
    return [job_return(c, r) for c, r in zip(configs, results)]
