"""`mltrain -m` as Azure ML HyperDrive: a search space in Hydra's sweep grammar, sampled by Optuna
(grid, random, sobol, bayesian), a primary metric and its goal, limits on total and concurrent runs
and on time, and Azure's early-termination policies, on every backend.

mltrain.command.engines comes here when any `sweep.*` key is set; a plain
`mltrain -m a=1,2` stays a grid, as Hydra's basic sweeper expands it. Optuna and matplotlib are imported only here.
"""
from __future__ import annotations

import random
from pathlib import Path
from typing import Any, List

from mltrain import backends
from mltrain.backends import backend_for
from mltrain.base.errors import ConfigError
from mltrain.launch.composer import Composer
from mltrain.launch.dryrun import dry_run_text
from mltrain.runs import mlflow_run
from mltrain.runs.console import Console
from mltrain.sweeps import settings
from mltrain.sweeps.settings import from_config, is_hyperdrive


def wanted(config: Any) -> bool:
    """Whether this `mltrain -m` is a HyperDrive sweep (cheap: no Optuna, no torch)."""
    from omegaconf import OmegaConf  # startup

    node = OmegaConf.select(config, "sweep", default=None)
    if node is None or not all(k in config for k in ("job", "compute", "run")):
        return False
    return is_hyperdrive(from_config(OmegaConf.to_container(node, resolve=True)))


def run(composer: Composer, arguments: List[str]) -> list:
    """A HyperDrive sweep of the command's `arguments` (Hydra's overrides, sweeps included);
    mltrain.command.engines comes here with the command's Composer."""
    from omegaconf import OmegaConf  # startup

    from mltrain.sweeps import controller, results, resume, space  # startup

    again = resume.pending()  # `mltrain runs resume SWEEP` came back in through Hydra with the sweep's overrides
    cfg = composer.config
    sweep = settings.check(settings.from_config(OmegaConf.to_container(cfg.sweep, resolve=True)))
    search = space.parse(list(arguments), dict(sweep.params))
    if not search.dimensions:
        raise ConfigError("sweep.params", "a HyperDrive sweep needs a search space: -m key=interval(a,b) or "
                                          "key=choice(a,b) on the command line, or sweep.params")
    space.check_sampling(search, sweep.sampling)
    if cfg.run.detach:
        raise ConfigError("run.detach", "a HyperDrive sweep is followed by its controller and cannot be detached "
                                        "(its members can run on Slurm; keep `mltrain -m` running, e.g. under nohup)")
    controller.require_optuna()
    seed = sweep.seed if sweep.seed is not None else random.SystemRandom().randrange(2**31)
    if again is not None:
        seed = again.seed if again.seed is not None else seed
    if cfg.dry_run:
        return _dry_run(composer, sweep, search, seed)
    backends.get(backend_for(str(cfg.compute.kind), str(cfg.distribution.kind), cfg.compute.get("login"))).preflight()
    sweep_dir = Path(str(cfg.hydra.sweep.dir)).expanduser()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if again is None:
        OmegaConf.save(cfg, sweep_dir / "multirun.yaml")
        resume.keep_config_path(sweep_dir)
        ctl = controller.Controller(composer, sweep, search, sweep_dir, seed)
    else:  # the sweep's own multirun.yaml stays: a second resume reads the same
        ctl = resume.Resumed(again, composer, sweep, search, sweep_dir, seed)
    with mlflow_run.mirror_started() as mirror:
        ctl.run()
    doc = results.write(ctl, final=True)
    # after sweep.json's final write: the mirror ends the sweep's parent run from it
    if mirror is not None:
        mirror.run(m.job.run_dir for m in ctl.members if m.job is not None)
    console = Console()
    for line in results.summary_lines(doc):
        console.write_line(line) if not line.startswith("sweep of") else console.status(line)
    picture = results.chart(doc, sweep_dir / results.CHART_FILE)
    console.status(f"sweep.json{' and ' + picture.name if picture else ''} in {sweep_dir}")
    ctl.raise_for_outcome()
    return []


def _dry_run(composer: Composer, sweep: Any, search: Any, seed: int) -> list:
    """The sweep's plan and the first member's dry run, sampled from an in-memory study: nothing is
    written, nothing starts."""
    from mltrain.sweeps.controller import concurrent_runs, make_study, total_runs  # startup
    from mltrain.sweeps.space import override_for  # startup

    console = Console()
    total = total_runs(sweep, search)
    console.status(f"sweep (dry run): {sweep.sampling} sampling, seed {seed}, {total} runs, "
                   f"{concurrent_runs(sweep, composer.config, total)} at a time, primary metric "
                   f"{sweep.primary_metric or '-'} ({sweep.goal}), early termination {sweep.early_termination.policy}")
    for key, text in search.describe().items():
        console.write_line(f"  {key} = {text}")
    trial = make_study(sweep, search, None, seed).ask(search.distributions())
    overrides = search.fixed + [override_for(d.key, d.value(trial.params[d.key])) for d in search.dimensions]
    console.status("first member: " + " ".join(overrides))
    job = composer.freeze([composer.compose(overrides)])[0]
    console.write_line(dry_run_text(job))
    return []
