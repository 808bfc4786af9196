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

from hydra_plugins.mltrain_launcher.launcher import MltrainLauncher
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
        from mltrain.launch.composer import HydraComposer  # plugin

        pipelines.refuse_sweep(arguments)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        existing = next(p for p in (sweep_dir, *sweep_dir.parents) if p.exists())
        composer = None
        try:
            make_sweep_dir(sweep_dir, Path(str(self.config.run.root)))
            engine = pipelines if pipelines.wanted(self.config) else sweeps if sweeps.wanted(self.config) else None
            if engine is not None:  # mltrain's own engines, beside Hydra: they compose through the composer
                composer = HydraComposer(self.config, self.launcher)
                return engine.run(composer, arguments)
            return super().sweep(arguments)
        finally:
            # what the engine or mltrain's launcher says (another launcher: Hydra's own way, the folder stays)
            ours = isinstance(self.launcher, MltrainLauncher)
            started = composer.started if composer is not None else (self.launcher.started if ours else True)
            if sweep_dir != existing and not started:
                top = next(p for p in (sweep_dir, *sweep_dir.parents) if p.parent == existing)
                shutil.rmtree(top, ignore_errors=True)
            elif sweep_dir != existing and composer is None and ours and self.launcher.single_run:
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
