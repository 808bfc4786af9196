"""Pipelines of steps (Azure ML's MpiStep, PythonScriptStep, CommandStep with PipelineData and
allow_reuse), declared in YAML: `mltrain pipeline=NAME` runs conf/pipeline/NAME.yaml.

Each step is an ordinary mltrain job with its own overrides of any group; the pipeline's own
command-line overrides reach every step, and `pipeline.steps.S....` changes one step. Inputs and
outputs are folders passed as paths. mltrain's Hydra sweeper comes here when `pipeline` is set.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any, Dict, List

from mltrain import backends
from mltrain.base.errors import ConfigError, MltrainError, RunCanceled, RunFailed, first_line, one_line
from mltrain.jobspec.job import new_run_id
from mltrain.jobspec.schema import PipelineConf
from mltrain.jobspec.status import CANCELED, COMPLETED
from mltrain.launch.composer import Composer
from mltrain.runs import mlflow_run
from mltrain.runs.console import Console

#: Overrides that belong to the pipeline itself, not to its steps.
OWN_KEYS = ("pipeline", "run.id", "run.detach", "dry_run", "hydra")


def wanted(config: Any) -> bool:
    from omegaconf import OmegaConf  # startup

    return OmegaConf.select(config, "pipeline", default=None) is not None and "job" in config


def refuse_sweep(arguments: List[str]) -> None:
    """`mltrain -m pipeline=a,b`: refused in one line. Hydra composes the primary config without sweep
    overrides, so such a command would otherwise run the default training job once per value and no
    pipeline at all. A sweep of pipelines is not offered: each pipeline already is many runs with its
    own record, reuse and resume, and a loop of `mltrain pipeline=NAME` commands says the same."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # startup

    for parsed in OverridesParser.create().parse_overrides(list(arguments)):
        if parsed.key_or_group.lstrip("+~") != "pipeline" or not parsed.is_sweep_override():
            continue
        try:
            names = list(parsed.sweep_string_iterator())
        except Exception:  # glob() and other sweeps that only Hydra's config loader can enumerate
            names = []
        each = "; ".join(f"mltrain pipeline={n}" for n in names) if names else "mltrain pipeline=NAME, once per pipeline"
        raise ConfigError("pipeline", f"-m does not sweep pipelines (a pipeline is itself many runs): run each one "
                                      f"as its own command ({each})")


def step_overrides(own: List[str], cli: List[str]) -> List[str]:
    """The step's overrides, then the command line's, one per key (the command line wins)."""
    merged: Dict[str, str] = {}
    for arg in [*own, *cli]:
        key = arg.split("=", 1)[0].lstrip("+~")
        merged.pop(key, None)
        merged[key] = arg
    return list(merged.values())


def _cli_overrides(arguments: List[str]) -> List[str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser  # startup

    out = []
    for parsed in OverridesParser.create().parse_overrides(list(arguments)):
        key = parsed.key_or_group
        if parsed.is_sweep_override():
            raise ConfigError(key, "a pipeline runs once: sweeping it with -m is not supported (run a sweep as "
                                   "its own job, or one pipeline per value)")
        if any(key == k or key.startswith(k + ".") or key.startswith(k + "/") for k in OWN_KEYS):
            continue
        out.append(parsed.input_line)
    return out


def build(composer: Composer, arguments: List[str]):
    """(name, settings, steps, frozen jobs by step, pipeline run id, runs root): everything checked and
    frozen, nothing created."""
    from hydra.core.utils import setup_globals  # startup
    from omegaconf import OmegaConf, open_dict  # startup

    from mltrain.components.checks import PRODUCED_LATER  # startup
    from mltrain.pipelines import graph  # startup

    cfg = composer.config
    name = str(cfg.hydra.runtime.choices.get("pipeline") or "pipeline")
    node = OmegaConf.to_container(cfg.pipeline, resolve=False)
    settings = PipelineConf(max_concurrent_steps=int(cfg.pipeline.max_concurrent_steps),
                            force_rerun=bool(cfg.pipeline.force_rerun),
                            continue_on_step_failure=bool(cfg.pipeline.continue_on_step_failure))
    if settings.max_concurrent_steps < 1:
        raise ConfigError("pipeline.max_concurrent_steps", "must be >= 1")
    steps = graph.parse(node, os.getcwd(), dry_run=bool(cfg.dry_run))
    cli = _cli_overrides(arguments)
    root = Path(os.path.expanduser(str(cfg.run.root))).resolve()
    run_id = str(cfg.run.id) if cfg.run.id else new_run_id(name)
    setup_globals()
    configs = {}
    for step in steps:
        try:
            # steps choosing the same groups compose once (mltrain.launch.composer)
            configs[step.name] = composer.compose(step_overrides([*_values_choice(step), *step.overrides], cli))
        except Exception as exc:
            raise _step_error(step.name, exc) from None
    dirs = {s.name: Path(os.path.expanduser(str(configs[s.name].run.root))).resolve() / f"{run_id}.{s.name}"
            for s in steps}
    jobs = {}
    shapes: Dict[str, Any] = {}  # the steps share most of their config: later ones are copies of the first
    for step in steps:
        c = configs[step.name]
        with open_dict(c):
            c.run.id = dirs[step.name].name
            c.run.detach = False
            c.experiment_name = name
            c.outputs = {o: str(dirs[step.name] / "outputs" / o) for o in step.outputs}
            c.inputs = {i.name: i.path or str(dirs[i.step] / "outputs" / i.output) for i in step.inputs.values()}
            for key, value in step.params.items():
                c.job.params[key] = value
            if step.controller:
                _as_controller(c)
        upstream = tuple(str(dirs[i.step] / "outputs" / i.output) for i in step.inputs.values() if i.step)
        upstream += tuple(i.path for i in step.inputs.values() if i.url and i.path)  # a dry run's web files
        token = PRODUCED_LATER.set(upstream)
        try:
            jobs[step.name] = _freeze(c, str(dirs[step.name].parent), shapes)
        except Exception as exc:
            raise _step_error(step.name, exc) from None
        finally:
            PRODUCED_LATER.reset(token)
    return name, settings, steps, jobs, run_id, root


#: The config group of the steps' `values:` (an in-memory option each, composed after the groups they choose).
VALUES_GROUP = "mltrain_step"


def _values_choice(step: Any) -> List[str]:
    """The override that composes the step's `values:`, held in Hydra's ConfigStore under a name that carries a
    digest of them (a kept composition of that name is always of these values: mltrain.config.compose_cache)."""
    if not step.values:
        return []
    import hashlib  # startup
    import json  # startup

    from mltrain.config.memory_nodes import ConfigNode, store_node  # startup

    digest = hashlib.sha256(json.dumps(step.values, sort_keys=True, default=str).encode()).hexdigest()[:16]
    node = ConfigNode(VALUES_GROUP, f"{step.name}_{digest}", step.values, "_global_")
    store_node(node)
    return [f"+{VALUES_GROUP}={node.name}"]


def _as_controller(c: Any) -> None:
    """A controller step (a sweep step's driver) holds nothing its runs wait for: its compute's schema
    says what that means there (SlurmComputeConf.for_controller: one CPU, no GPU). Its grace on a cancel
    covers its runs' own grace and its settling of them: a controller killed first leaves the runs it
    drives recorded Running (their ends are written by the controller)."""
    from mltrain.jobspec.computes import compute_schema  # startup

    grace = float(c.run.get("kill_grace_s") or 0.0)
    c.run.kill_grace_s = grace + max(grace, CONTROLLER_SETTLE_S)
    schema = compute_schema(str(c.compute.get("kind")))
    if schema is not None:
        schema.for_controller(c.compute)


#: Seconds a canceled controller is given, beyond its runs' own grace, to record their ends and its own
#: (a sweep driver started under load needs seconds to compose, stop and write; 5 s was seen too few in CI).
CONTROLLER_SETTLE_S = 30.0


def _freeze(config: Any, runs_root: str, shapes: Dict[str, Any]):
    from mltrain.launch.freeze import freeze_member  # startup

    job = freeze_member(config, runs_root, sweep_index=None, shapes=shapes)
    return dataclasses.replace(job, sweep_dir=None, sweep_index=None)


def _step_error(step: str, exc: BaseException) -> MltrainError:
    if isinstance(exc, MltrainError):
        return ConfigError(f"pipeline.steps.{step}", str(exc))
    from hydra.errors import HydraException  # startup
    from omegaconf.errors import OmegaConfBaseException  # startup

    if isinstance(exc, (HydraException, OmegaConfBaseException)):
        return ConfigError(f"pipeline.steps.{step}", one_line(exc))
    raise exc


def run(composer: Composer, arguments: List[str]) -> list:
    """The pipeline the command chose (`pipeline=NAME`), with the command's other `arguments` for every step;
    mltrain.command.engines comes here with the command's Composer."""
    from mltrain.launch.orchestrate import CancelOnSignal  # startup
    from mltrain.pipelines import graph_record, runner  # startup

    cfg = composer.config
    name, settings, steps, jobs, run_id, root = build(composer, arguments)
    pipe = runner.PipelineRun(name, steps, jobs, root, settings, list(arguments))
    detach = bool(cfg.run.detach)
    if detach:
        runner.check_detach(pipe.queued_on)
    if cfg.dry_run:
        return _dry_run(pipe)
    for backend in sorted({j.backend for j in jobs.values()}):  # each step's request too (GPUs a partition lacks)
        backends.get(backend).preflight([j for j in jobs.values() if j.backend == backend])
    run_dir = runner.pipeline_dir(root, run_id)
    composer.mark_started()  # runs exist from here on
    pipe.create(run_dir)
    interrupt = threading.Event()
    with mlflow_run.mirror_started(not detach) as mirror, CancelOnSignal(interrupt):
        if pipe.queued_on is not None:
            pipe.submit_graph()
            if detach:
                Console().status(f"detached: pipeline {pipe.record.id} is queued on Slurm as one graph; follow it "
                                 f"with `mltrain runs status|cancel {pipe.record.id}`")
                return []
            pipe.follow_graph(interrupt)
        else:
            pipe.run_here(interrupt)
    status = graph_record.sync(pipe.record)
    if mirror is not None:
        mirror.run([*(sr.job.run_dir for sr in pipe.runs.values()), str(pipe.record.dir)])
    _summary(pipe)
    if status != COMPLETED:
        error = RunCanceled if status == CANCELED else RunFailed
        message = f"pipeline {pipe.record.id} {status}: {pipe.record.doc.error or ''}".strip()
        Console().status(message)
        raise error(message)
    return []


def _summary(pipe: Any) -> None:
    console = Console()
    pipe.record.reload()
    table = pipe.record.doc.pipeline.steps
    console.status(f"pipeline {pipe.name} {pipe.record.status} ({len(table)} steps)  {pipe.record.dir}")
    for step in pipe.record.doc.pipeline.order:
        info = table[step]
        phases = info.phases or {}
        took = max(phases.values()) - min(phases.values()) if phases else 0.0
        how = f"reused {info.reused_from}" if info.reused_from else first_line(info.error or "")
        console.write_line(f"  {step:<16} {info.status:<9} {took:7.1f}s  {info.run_id}  {how}".rstrip())


def _dry_run(pipe: Any) -> list:
    from mltrain.launch.dryrun import dry_run_text  # startup

    console = Console()
    where = f"queued on {pipe.queued_on}" if pipe.queued_on else "started by this process"
    console.status(f"pipeline {pipe.name} (dry run): {len(pipe.steps)} steps {where}; nothing is started, "
                   "nothing is created")
    for step in pipe.steps:
        ins = ", ".join(f"{i.name}<-{f'{i.step}.outputs.{i.output}' if i.step else i.path}" for i in step.inputs.values())
        console.write_line(f"  {step.name}: after [{', '.join(step.parents)}]  inputs [{ins}]  outputs "
                           f"[{', '.join(step.outputs)}]  allow_reuse {str(step.allow_reuse).lower()}")
    for step in pipe.steps:
        console.write_line(dry_run_text(pipe.runs[step.name].job))
    return []
