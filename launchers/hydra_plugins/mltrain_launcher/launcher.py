"""`hydra/launcher=mltrain`: one job becomes node_count x process_count_per_node rank processes.

Thin by design (as hydra_submitit_launcher): the launch path lives in mltrain.launch.hydra_adapter and is
imported only when something is launched.
"""
from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
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
        # Hydra's sweepers compose every member of a batch once to check it before the launcher sees the batch; this
        # launcher composes and checks each itself before it starts any (mltrain.launch.members): the fence says why
        from mltrain.config.hydra_internals import skip_sweepers_batch_check  # plugin

        skip_sweepers_batch_check(MltrainLauncher)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        from mltrain.launch.hydra_adapter import launch  # plugin

        return launch(self, job_overrides, initial_job_idx)
