"""`hydra/sweeper=mltrain`: Hydra's basic sweeper (same grammar, same batches) without its
pre-launch composition of every member. Where Hydra's own app runs the `mltrain` config (mltrain.cli.main), the
command goes to mltrain's engines as `mltrain` hands it over itself: a run or a sweep over values, a pipeline, or
Azure ML HyperDrive's sweep when any `sweep.*` key is set (mltrain.sweeps).

The mltrain launcher composes and validates every member of a batch before it starts any of them,
so the basic sweeper's own check would compose each member a second time (about 0.1 s each).
"""
from dataclasses import dataclass

from hydra.core.config_store import ConfigStore

from hydra_plugins.mltrain_launcher.launcher import MltrainLauncher
from mltrain.config.hydra_internals import BasicSweeper, BasicSweeperConf


@dataclass
class MltrainSweeperConf(BasicSweeperConf):
    _target_: str = "hydra_plugins.mltrain_launcher.sweeper.MltrainSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="mltrain", node=MltrainSweeperConf, provider="mltrain")


class MltrainSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch) -> None:
        """Left to the launcher, which composes and validates every member before launching."""

    def sweep(self, arguments):
        """The `mltrain` config on mltrain's launcher is handed to mltrain's engines, as `mltrain` itself hands
        it over (mltrain.command.engines), with the config Hydra composed; anything else is Hydra's basic sweep."""
        from mltrain.config.compose import is_mltrain_config  # plugin

        if not (is_mltrain_config(self.config) and isinstance(self.launcher, MltrainLauncher)):
            return super().sweep(arguments)
        from mltrain.command.engines import run_command  # plugin
        from mltrain.launch.composer import DEFAULT_RUNS_ROOT, Composer  # plugin

        runs_root = str(self.launcher.params.get("runs_root") or DEFAULT_RUNS_ROOT)
        run_command(Composer(self.config, self.hydra_context.config_loader, runs_root), arguments)
        return []
