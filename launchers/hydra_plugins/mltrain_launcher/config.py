from dataclasses import dataclass

from hydra.core.config_store import ConfigStore


@dataclass
class MltrainLauncherConf:
    _target_: str = "hydra_plugins.mltrain_launcher.launcher.MltrainLauncher"
    # Run directories of plain Hydra apps (mltrain's own config sets run.root instead).
    runs_root: str = "${oc.env:MLTRAIN_HOME,'~/.mltrain'}/runs"


ConfigStore.instance().store(group="hydra/launcher", name="mltrain", node=MltrainLauncherConf, provider="mltrain")
