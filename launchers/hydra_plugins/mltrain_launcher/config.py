"""mltrain's Hydra plugins: the launcher (`hydra/launcher=mltrain`, `hydra/launcher=mltrain_slurm`)
and the config search path.

Hydra imports every module of every hydra_plugins package at start-up, for every Hydra app on the
machine, so these modules import nothing heavy at module level (mltrain.jobspec.slurm_compute is plain
dataclasses).
"""
from dataclasses import dataclass, field
from typing import Any, Dict

from hydra.core.config_store import ConfigStore

from mltrain.jobspec.slurm_compute import SlurmComputeConf

RUNS_ROOT = "${oc.env:MLTRAIN_HOME,'~/.mltrain'}/runs"


@dataclass
class MltrainLauncherConf:
    _target_: str = "hydra_plugins.mltrain_launcher.launcher.MltrainLauncher"
    # Run directories of plain Hydra apps (mltrain's own config sets run.root instead).
    runs_root: str = RUNS_ROOT
    # Where a plain Hydra app's jobs run: {kind: local} or {kind: slurm, partition: ..., ...} with the
    # keys of mltrain's compute=slurm (mltrain's own app uses its `compute` group instead).
    compute: Dict[str, Any] = field(default_factory=lambda: {"kind": "local"})


@dataclass
class MltrainSlurmLauncherConf(SlurmComputeConf):
    """`hydra/launcher=mltrain_slurm`: compute=slurm's typed keys at the top, as hydra-submitit-launcher
    users write them (`hydra.launcher.partition=debug`); a misspelt key is refused."""

    _target_: str = "hydra_plugins.mltrain_launcher.launcher.MltrainLauncher"
    runs_root: str = RUNS_ROOT


ConfigStore.instance().store(group="hydra/launcher", name="mltrain", node=MltrainLauncherConf, provider="mltrain")
ConfigStore.instance().store(group="hydra/launcher", name="mltrain_slurm", node=MltrainSlurmLauncherConf,
                             provider="mltrain")
