"""`hydra/sweeper=mltrain`: Hydra's basic sweeper (same grammar, same batches) without its
pre-launch composition of every member.

The mltrain launcher composes and validates every member of a batch before it starts any of them,
so the basic sweeper's own check would compose each member a second time (about 0.1 s each).
"""
from dataclasses import dataclass

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper, BasicSweeperConf
from hydra.core.config_store import ConfigStore


@dataclass
class MltrainSweeperConf(BasicSweeperConf):
    _target_: str = "hydra_plugins.mltrain_launcher.sweeper.MltrainSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="mltrain", node=MltrainSweeperConf, provider="mltrain")


class MltrainSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch) -> None:
        """Left to the launcher, which composes and validates every member before launching."""
