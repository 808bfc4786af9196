"""What the engines compose and freeze their runs with: a typed Composer, not Hydra's sweeper.

A HyperDrive sweep (mltrain.sweeps) and a pipeline (mltrain.pipelines) take a Composer and the command's
overrides. The Hydra sweeper plugin (launchers/hydra_plugins/mltrain_launcher/sweeper.py) only builds one
from what Hydra hands it, `HydraComposer`, as hydra-submitit-launcher adapts Hydra's launcher API to
submitit; the engines never see the plugin, and tell it that runs exist through `mark_started`, not an
attribute set on it.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Dict, List, Sequence

from omegaconf import DictConfig

from mltrain.spec.job import FrozenJob

DEFAULT_RUNS_ROOT = "~/.mltrain/runs"


class Composer(ABC):
    """Composes one run's config from overrides and freezes configs into jobs. `config` is the command's own
    composed config (with its `hydra` node): the sweep's settings, the pipeline's name, `run.*`, `dry_run`."""

    def __init__(self, config: DictConfig, runs_root: str = DEFAULT_RUNS_ROOT) -> None:
        self.config, self.runs_root = config, runs_root
        self.started = False

    @abstractmethod
    def compose(self, overrides: Sequence[str], index: int = 0) -> DictConfig:
        """The config of one run (a sweep's member `index`, a pipeline's step), with its `hydra` node."""

    def freeze(self, configs: List[DictConfig]) -> List[FrozenJob]:
        from mltrain.launch.hydra_adapter import freeze_members  # startup

        return freeze_members(configs, self.runs_root)

    def mark_started(self) -> None:
        """Runs exist from here on: whoever made the command's folders keeps them."""
        self.started = True


class HydraComposer(Composer):
    """Composition through the loader Hydra set up for this command (mltrain.config.compose): runs that
    choose the same config groups share one composition of the defaults, across every call."""

    def __init__(self, config: DictConfig, launcher: Any) -> None:
        super().__init__(config, str(launcher.params.get("runs_root") or DEFAULT_RUNS_ROOT))
        self._launcher = launcher
        self._bases: Dict[Any, Any] = {}

    def compose(self, overrides: Sequence[str], index: int = 0) -> DictConfig:
        from mltrain.config.compose import compose_members  # startup

        return compose_members(self._launcher, [list(overrides)], index, self._bases)[0]
