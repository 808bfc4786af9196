"""Building a Slurm submission, apart from submitting it (so the dry run is free and exact):
submitit's executor parameters for a run, and the batch script submitit writes from them."""
from __future__ import annotations

import difflib
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict

from mltrain.backends.slurm import submitit_internals
from mltrain.backends.slurm.containers import container_flags
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf

if TYPE_CHECKING:
    from submitit import AutoExecutor


def executor_parameters(job: FrozenJob) -> Dict[str, Any]:
    """submitit AutoExecutor parameters for one run (a sweep's array parallelism is added by the caller)."""
    c = compute_as(job.compute, SlurmComputeConf)
    params: Dict[str, Any] = {
        "nodes": job.node_count,
        "tasks_per_node": job.process_count_per_node,
        "cpus_per_task": c.cpus_per_task,
        "timeout_min": c.timeout_min,
        "name": job.experiment,
        "slurm_signal_delay_s": c.signal_delay_s,
        # A rank exiting non-zero ends the whole step, so the job is FAILED (hydra #1928).
        "slurm_srun_args": ["--kill-on-bad-exit=1", *c.srun_args],
    }
    if c.gpus_per_node:
        params["gpus_per_node"] = c.gpus_per_node
    if c.gpus_per_task:
        params["slurm_gpus_per_task"] = c.gpus_per_task
    if c.gpu_bind:
        # on srun, not sbatch: the binding is the step's (Slurm 22.05 honours both; sbatch's would also reach any
        # srun a rank program starts, through SLURM_GPU_BIND)
        params["slurm_srun_args"].append(f"--gpu-bind={c.gpu_bind}")
    if c.mem_gb is not None:
        params["mem_gb"] = c.mem_gb
    for key, name in (("partition", "slurm_partition"), ("account", "slurm_account"), ("qos", "slurm_qos"),
                      ("constraint", "slurm_constraint")):
        if getattr(c, key):
            params[name] = getattr(c, key)
    if c.additional_parameters:
        params["slurm_additional_parameters"] = dict(c.additional_parameters)
    srun_container, _ = container_flags(c, job.environment or {}, job.run_dir)
    params["slurm_srun_args"] += srun_container
    if job.distribution.kind == "mpi":
        # srun starts the MPI ranks itself through the cluster's PMI plugin: no mpirun in the allocation
        params["slurm_srun_args"].append(f"--mpi={job.distribution.slurm_mpi}")
    setup = list((job.environment.get("spec") or {}).get("setup") or [])
    if setup:
        params["slurm_setup"] = setup
    params.update(submitit_names(dict(c.submitit)))
    return params


def submitit_names(extra: Dict[str, Any]) -> Dict[str, Any]:
    """compute.submitit in AutoExecutor's spelling. Users write submitit's own names: the generic ones
    (timeout_min, mem_gb, ...) and SlurmExecutor's with or without the `slurm_` prefix AutoExecutor
    wants (`comment` or `slurm_comment`); anything else is refused naming the closest and the valid
    ones (submitit itself would only say the prefix is missing)."""
    if not extra:  # asking submitit reads every installed package's entry points: 0.05 s of each Slurm command
        return {}
    generic, slurm = submitit_internals.valid_parameters()
    out: Dict[str, Any] = {}
    for key, value in extra.items():
        name = key[len("slurm_"):] if key.startswith("slurm_") else key
        if key in generic:
            out[key] = value
        elif name in slurm:
            out[f"slurm_{name}"] = value
        else:
            valid = sorted(generic | slurm)
            close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
            hint = f"; closest: {close[0]}" if close else ""
            raise ConfigError(f"compute.submitit.{key}", f"not a submitit parameter{hint}", valid)
    return out


#: How submitit starts each task's Python: through mltrain/backends/slurm/task_main.py (it says why).
TASK_PYTHON = f"{shlex.quote(sys.executable)} -u {shlex.quote(str(Path(__file__).with_name('task_main.py')))}"


def make_executor(params: Dict[str, Any], folder: Path, max_requeues: int, offline: bool = False) -> AutoExecutor:
    """submitit's executor for these parameters. `offline` (the parameter check and the dry run) builds it
    where no Slurm is installed too: submitit refuses to build one unless srun is on PATH, but checking the
    parameters and writing the batch script need no cluster, and a dry run on a laptop must still show them."""

    import submitit  # heavy

    if offline and shutil.which("srun") is None:  # a real submission was refused earlier (Backend.preflight)
        with submitit_internals.offline():
            return make_executor(params, folder, max_requeues)
    executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm", slurm_max_num_timeout=max_requeues,
                                     slurm_python=TASK_PYTHON)
    try:
        executor.update_parameters(**params)
    except (NameError, ValueError, TypeError) as exc:  # submitit names the parameters it accepts
        raise ConfigError("compute.submitit", " ".join(str(exc).splitlines()[:2])) from None
    return executor


def sbatch_script(params: Dict[str, Any], folder: Path, max_requeues: int) -> str:
    """The batch script submitit writes for these parameters (submitit builds it; nothing is submitted)."""
    return submitit_internals.sbatch_text(make_executor(params, folder, max_requeues, offline=True))
