"""The body of the Hydra launcher plugin (launchers/hydra_plugins/mltrain_launcher): Hydra's job list adapted to
mltrain's engine of runs (mltrain.launch.members), as hydra-submitit-launcher adapts it to submitit, and the
engine's outcome given back as Hydra's JobReturns.

Hydra comes here for a plain Hydra app (`hydra/launcher=mltrain`) and for the `mltrain` app run by another
Hydra sweeper (`hydra/sweeper=optuna`); `mltrain` itself composes with Hydra's compose API and hands its runs to
the engines directly (mltrain.command.app).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from hydra.core.utils import JobReturn, JobStatus, setup_globals
from omegaconf import DictConfig, OmegaConf

from mltrain.base.errors import RunCanceled, RunFailed
from mltrain.config.compose import is_mltrain_config
from mltrain.jobspec.status import CANCELED, COMPLETED, QUEUED
from mltrain.launch import hydra_app
from mltrain.launch.composer import DEFAULT_RUNS_ROOT, Composer
from mltrain.launch.members import launch_members
from mltrain.launch.orchestrate import RunResult


def app_compute(params: Any) -> Optional[Dict[str, Any]]:
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


def job_return(cfg: DictConfig, result: RunResult) -> JobReturn:
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


def row_return(cfg: DictConfig, row: Dict[str, Any]) -> JobReturn:
    """A deferred member's JobReturn, from its summary row (its worker makes the run: mltrain.launch.deferred)."""
    ret = JobReturn(overrides=row["overrides"], cfg=None, hydra_cfg=cfg, working_dir=row["run_dir"],
                    task_name=str(cfg.hydra.job.name))
    ret.status = JobStatus.COMPLETED
    ret.return_value = {"run_id": row["run_id"], "run_dir": row["run_dir"], "status": row["status"]}
    return ret


def launch(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """The body of MltrainLauncher.launch()."""
    setup_globals()
    composer = Composer(launcher.config, launcher.hydra_context.config_loader,
                        str(launcher.params.get("runs_root") or DEFAULT_RUNS_ROOT), app_compute(launcher.params))
    launched = launch_members(composer, job_overrides, initial_job_idx,
                              payloads=lambda configs: hydra_app.payloads(launcher, configs))
    configs = launched.configs
    if launched.rows is not None:
        return [row_return(configs[0], row) for row in launched.rows]
    if not is_mltrain_config(configs[0]):  # its ranks pickled their own JobReturns
        return hydra_app.job_returns(configs, launched.results)
    return [job_return(c, r) for c, r in zip(configs, launched.results)]
