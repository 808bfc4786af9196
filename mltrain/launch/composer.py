"""What the engines compose and freeze their runs with: a typed Composer, not Hydra's sweeper or launcher.

Every engine (a run or a sweep over values: mltrain.launch.members; a HyperDrive sweep: mltrain.sweeps; a
pipeline: mltrain.pipelines) takes a Composer and the command's overrides. A Composer holds the command's
composed config and the Hydra config loader that composed it, taken from Hydra's public API
(`GlobalHydra.instance().config_loader()` in mltrain.command.app; a plugin's `HydraContext` where Hydra
runs a plain app on mltrain's launcher). The engines tell whoever made the command's folders that runs exist
through `mark_started`, not an attribute set on a plugin.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from omegaconf import DictConfig

from mltrain.jobspec.job import FrozenJob

DEFAULT_RUNS_ROOT = "~/.mltrain/runs"


class Composer:
    """Composes one run's config from overrides and freezes configs into jobs. `config` is the command's own
    composed config (with its `hydra` node): the sweep's settings, the pipeline's name, `run.*`, `dry_run`.
    Runs that choose the same config groups share one composition of the defaults, across every call."""

    def __init__(self, config: DictConfig, loader: Any, runs_root: str = DEFAULT_RUNS_ROOT,
                 app_compute: Optional[Dict[str, Any]] = None, bases: Optional[Dict[Any, Any]] = None) -> None:
        self.config, self.loader, self.runs_root, self.app_compute = config, loader, runs_root, app_compute
        self.started = False
        #: compositions shared between runs, and the command's overrides as Hydra parsed them, once
        #: (mltrain.config.compose)
        self.bases: Dict[Any, Any] = {} if bases is None else bases

    def compose(self, overrides: Sequence[str], index: int = 0) -> DictConfig:
        """The config of one run (a sweep's member `index`, a pipeline's step), with its `hydra` node."""
        return self.compose_many([overrides], index)[0]

    def compose_many(self, job_overrides: Sequence[Sequence[str]], first_index: int) -> List[DictConfig]:
        from mltrain.config.compose import compose_members  # startup

        return compose_members(self.config, self.loader, [list(o) for o in job_overrides], first_index, self.bases)

    def freeze(self, configs: List[DictConfig], shapes: Optional[Dict[str, Any]] = None) -> List[FrozenJob]:
        """`shapes`: the first member's frozen shape, which later members of the same sweep are copies of
        (mltrain.launch.freeze), carried across calls by a caller freezing one sweep in parts."""
        from mltrain.launch.freeze import freeze_member  # startup

        shapes = {} if shapes is None else shapes
        return [freeze_member(cfg, self.runs_root, sweep_index=int(cfg.hydra.job.num), app_compute=self.app_compute,
                              shapes=shapes) for cfg in configs]

    def mark_started(self) -> None:
        """Runs exist from here on: whoever made the command's folders keeps them."""
        self.started = True
