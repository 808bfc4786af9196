"""`hydra/sweeper=mltrain`: Hydra's basic sweeper (same grammar, same batches) without its
pre-launch composition of every member, and without leaving a sweep folder behind for a command
that started nothing. When any `sweep.*` key of mltrain's config is set, the sweep is Azure ML
HyperDrive's instead (mltrain.sweeps: sampled, metric-driven, with early termination).

The mltrain launcher composes and validates every member of a batch before it starts any of them,
so the basic sweeper's own check would compose each member a second time (about 0.1 s each).
"""
import shutil
from dataclasses import dataclass
from pathlib import Path

from hydra.core.config_store import ConfigStore

from mltrain.config.hydra_internals import BasicSweeper, BasicSweeperConf
from mltrain.errors import ConfigError


@dataclass
class MltrainSweeperConf(BasicSweeperConf):
    _target_: str = "hydra_plugins.mltrain_launcher.sweeper.MltrainSweeper"


ConfigStore.instance().store(group="hydra/sweeper", name="mltrain", node=MltrainSweeperConf, provider="mltrain")


class MltrainSweeper(BasicSweeper):
    def validate_batch_is_legal(self, batch) -> None:
        """Left to the launcher, which composes and validates every member before launching."""

    def sweep(self, arguments):
        # BasicSweeper.sweep writes <sweep dir>/multirun.yaml before anything is validated. Rather than
        # copy Hydra's loop, undo that when the launcher started no run (a refused config, a dry run) or
        # a lone run (`mltrain` without -m is a sweep of one to Hydra, not to the user).
        from mltrain import pipelines, sweeps  # plugin

        pipelines.refuse_sweep(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        existing = next(p for p in (sweep_dir, *sweep_dir.parents) if p.exists())
        try:
            make_sweep_dir(sweep_dir, Path(str(self.config.run.root)))
            if pipelines.wanted(self.config):
                return pipelines.run(self, arguments)
            if sweeps.wanted(self.config):
                return sweeps.run(self, arguments)
            return super().sweep(arguments)
        finally:
            if sweep_dir != existing and not getattr(self.launcher, "started", False):
                top = next(p for p in (sweep_dir, *sweep_dir.parents) if p.parent == existing)
                shutil.rmtree(top, ignore_errors=True)
            elif sweep_dir != existing and getattr(self.launcher, "single_run", False):
                # the run itself may live beside it: remove the sweep folder and only the parents left empty
                shutil.rmtree(sweep_dir, ignore_errors=True)
                for parent in sweep_dir.parents:
                    if parent == existing or any(parent.iterdir()):
                        break
                    parent.rmdir()


def make_sweep_dir(sweep_dir: Path, run_root: Path) -> None:
    """The folder every command writes first (Hydra's multirun.yaml), made here so that a run.root
    that cannot exist (under /proc, below a file, read-only) is one line naming it, dry run or not,
    instead of a traceback from inside Hydra's sweeper. The caller removes it if nothing started."""
    try:
        sweep_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        key, root = ("run.root", run_root) if run_root in sweep_dir.parents else ("hydra.sweep.dir", sweep_dir)
        failed = f"{exc.filename}: " if exc.filename and str(exc.filename) != str(root) else ""
        raise ConfigError(key, f"cannot create {root} ({failed}{exc.strerror})") from None
