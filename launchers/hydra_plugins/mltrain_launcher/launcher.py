"""`hydra/launcher=mltrain`: one job becomes node_count x process_count_per_node rank processes.

Thin by design (as hydra_submitit_launcher): the launch path lives in mltrain.launch.hydra_adapter and is
imported only when something is launched.
"""
from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


class MltrainLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config: Optional[DictConfig] = None
        self.task_function: Optional[TaskFunction] = None
        self.hydra_context: Optional[HydraContext] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function
        _members_checked_here()

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from mltrain.launch.hydra_adapter import launch  # plugin

        return launch(self, job_overrides, initial_job_idx)


def _members_checked_here() -> None:
    """Hydra's sweepers compose every member of a batch once to check it (Sweeper.validate_batch_is_legal) before
    the launcher sees the batch; this launcher composes and checks every member itself before it starts any
    (mltrain.launch.members), so that first composition only doubled the work: 40 s of a 1,000-member packed sweep
    of a plain app on Slurm, before its first member ran (hydra#1324; `hydra/sweeper=mltrain` skips it too). Skipped
    for a sweeper whose launcher is this one, once per process; any other launcher's sweeps are checked as before."""
    if getattr(Sweeper.validate_batch_is_legal, "_mltrain", False):
        return
    checked = Sweeper.validate_batch_is_legal

    def validate_batch_is_legal(self: Sweeper, batch: Sequence[Sequence[str]]) -> None:
        if not isinstance(getattr(self, "launcher", None), MltrainLauncher):
            checked(self, batch)

    validate_batch_is_legal._mltrain = True  # type: ignore[attr-defined]
    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
