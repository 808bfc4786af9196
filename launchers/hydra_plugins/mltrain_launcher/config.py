from dataclasses import dataclass, field
from typing import Any, Dict

from hydra.core.config_store import ConfigStore


@dataclass
class MltrainLauncherConf:
    _target_: str = "hydra_plugins.mltrain_launcher.launcher.MltrainLauncher"
    # Run directories of plain Hydra apps (mltrain's own config sets run.root instead).
    runs_root: str = "${oc.env:MLTRAIN_HOME,'~/.mltrain'}/runs"
    # Where a plain Hydra app's jobs run: {kind: local} or {kind: slurm, partition: ..., ...} with the
    # keys of mltrain's compute=slurm (mltrain's own app uses its `compute` group instead).
    compute: Dict[str, Any] = field(default_factory=lambda: {"kind": "local"})


ConfigStore.instance().store(group="hydra/launcher", name="mltrain", node=MltrainLauncherConf, provider="mltrain")
