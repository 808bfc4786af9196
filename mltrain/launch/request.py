"""The typed request: what every front end builds, the one type handed to the engines.

    request = Request(job="script", overrides=("job.script=train.py", "job.source_directory=./src"))
    job = freeze_request(request)        # a FrozenJob, or one MltrainError with the CLI's one line
    run_app(request)                     # mltrain.command.app: a run, a sweep or a pipeline, to its end

A request says what to compose (the job kind, config-group choices and values as Hydra overrides,
extra config folders searched before the current folder's `.mltrain/` and mltrain's presets, values
held in memory as one more config), the run's name and experiment, and who asked (`origin`, recorded in run.json). Composition goes through
Hydra's public compose API (`initialize_config_module` + `compose`), in this process: no argv, no
temporary environment variables, no change of directory (mltrain.config.hydra_session). The result is frozen by the same
`launch.freeze` the launcher plugin uses, so a request and the equivalent `mltrain` command make the
same job.json (tests/test_job_api.py holds that).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mltrain.base.errors import ConfigError, MltrainError, one_line
from mltrain.config.hydra_internals import restore_singletons, saved_singletons
from mltrain.config.hydra_session import hydra_session
from mltrain.config.memory_nodes import ConfigNode
from mltrain.jobspec.job import FrozenJob

#: Where a request's in-memory config node is held in Hydra's ConfigStore while it composes (compose()).
REQUEST_GROUP, REQUEST_NODE = "mltrain_request", "node"
#: The override that composes a request's values, after every group (values_node).
REQUEST_CHOICE = f"+{REQUEST_GROUP}={REQUEST_NODE}"


@dataclass(frozen=True)
class Request:
    """What every front end hands over, typed: a run, a sweep or a pipeline. The CLI, `job create`, the Python
    API, the v1 and v2 SDKs, resume and the sweep step each build one; `run_app` runs it to its end (or until it
    is queued: `detach`), `freeze_request` composes and freezes one run of it.

    `overrides`: Hydra's override strings (`compute=slurm`, `job.arguments=[a,b]`; sweeps allowed, `a=1,2`, where
    it is run as a command); `config_dirs`: folders of config groups searched first (a v1 workspace's `.mltrain`,
    a repository's); `nodes`: config options held in memory (a v2 file's generated groups); `job`: the job kind;
    `groups`: the option chosen in other config groups;
    `values`: typed values composed in last, as a `_global_` config file listed after every group would be (a v2
    job's fields, a v1 run configuration's): an in-memory config node, no file written."""

    overrides: Tuple[str, ...] = ()
    config_dirs: Tuple[str, ...] = ()
    nodes: Tuple[ConfigNode, ...] = ()
    job: Optional[str] = None
    #: an option of each config group, typed ({"compute": "gpu-cluster", "environment": "current"})
    groups: Dict[str, str] = field(default_factory=dict)
    values: Optional[Dict[str, Any]] = None
    run_id: Optional[str] = None
    experiment_name: Optional[str] = None
    #: {"front_end": "azureml-v1", "file": ..., "line": ...}: kept in run.json
    origin: Dict[str, Any] = field(default_factory=dict)
    #: queued and left to run: the command returns once its runs exist (`--detach`, `run.detach=true`)
    detach: bool = False

    def choices(self) -> Tuple[str, ...]:
        """The job kind and the overrides, without the request's values and names: for a caller that hands the
        values over itself (a pipeline step's `values:`, a sweep driver's config node)."""
        return (*([f"job={self.job}"] if self.job else []), *(f"{g}={o}" for g, o in self.groups.items()),
                *self.overrides)

    def all_overrides(self) -> Tuple[str, ...]:
        """The request as Hydra overrides, the request's own fields last (they win): its values' option after every
        other option the overrides add (a v2 file's `+azureml_job=NAME`), its names after every value."""
        mine = [f"job={self.job}"] if self.job else []
        mine += [f"{group}={option}" for group, option in self.groups.items()]
        tail = [REQUEST_CHOICE] if self.values is not None else []
        if self.experiment_name:
            tail.append(f"experiment_name={quote(self.experiment_name)}")
        if self.run_id:
            tail.append(f"run.id={quote(self.run_id)}")
        if self.detach:
            tail.append("run.detach=true")
        return tuple(mine + list(self.overrides) + tail)

    def all_nodes(self) -> Tuple[ConfigNode, ...]:
        """The request's config nodes, its values last (composed by REQUEST_CHOICE)."""
        return self.nodes if self.values is None else (*self.nodes, values_node(self.values))


def values_node(values: Dict[str, Any]) -> ConfigNode:
    """A request's values as an in-memory `_global_` option (composed by REQUEST_CHOICE), so typed values reach
    the composition as they are: no override text to write and parse back."""
    return ConfigNode(REQUEST_GROUP, REQUEST_NODE, values, "_global_")


def merge_values(*parts: Dict[str, Any]) -> Dict[str, Any]:
    """Nested values, later parts winning: mappings merged key by key, anything else (a list too) replaced."""
    out: Dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merge_values(out[key], value)
            else:
                out[key] = value
    return out


def quote(value: str) -> str:
    """A string as one value of Hydra's override grammar, whatever characters it holds. In a quoted value Hydra
    reads a backslash as itself, except in a run just before a quote or at the end, where each pair is one."""
    import re  # startup

    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value).replace("'", "\\'")
    return f"'{escaped}'"


def compose(request: Request, isolate: bool = True) -> Any:
    """The composed config (with its `hydra` node), as `mltrain` composes it for one run. `isolate`: Hydra's
    global state put back as the caller had it (False only where no other Hydra app runs: `mltrain job create`)."""
    from hydra.errors import HydraException  # startup
    from omegaconf.errors import OmegaConfBaseException  # startup

    overrides = list(request.all_overrides())
    _refuse_sweeps(overrides)
    try:
        # the request's values as an in-memory `_global_` option (gone again with the ConfigStore's state)
        with hydra_session(request.config_dirs, request.all_nodes(), isolate) as hydra_compose:
            return hydra_compose(overrides)
    except (HydraException, OmegaConfBaseException) as exc:
        from mltrain.config.messages import user_error  # startup

        error = user_error(exc)  # the one line the CLI prints: never None for Hydra's and OmegaConf's errors
        assert error is not None
        raise error from None


def _refuse_sweeps(overrides: Sequence[str]) -> None:
    """A request is one run: `a=1,2` would otherwise compose as the string '1,2' or fail deep in Hydra."""
    for item in sweeps_in(overrides):
        raise ConfigError(item.key_or_group, f"'{item.input_line}' is a sweep; a job request is one run "
                                             "(submit a sweep instead)")


def sweeps_in(overrides: Sequence[str]) -> List[Any]:
    """The overrides that sweep (`a=1,2`, `a=range(3)`), parsed by Hydra; a line Hydra cannot parse is one
    MltrainError."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # startup

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception as exc:  # noqa: BLE001 - Hydra's parse errors are several lines
        raise MltrainError(one_line(exc)) from None
    return [item for item in parsed if item.is_sweep_override()]


def freeze_request(request: Request, isolate: bool = True) -> FrozenJob:
    """Compose, validate and freeze one run. Raises MltrainError with the CLI's one line. `isolate`: as for
    compose()."""
    from hydra.core.hydra_config import HydraConfig  # startup
    from omegaconf.errors import OmegaConfBaseException  # startup

    from mltrain.launch.freeze import freeze  # startup

    cfg = compose(request, isolate)
    saved = saved_singletons() if isolate else None  # the caller's HydraConfig, put back (see compose)
    HydraConfig.instance().set_config(cfg)  # `${hydra:...}` in a preset resolves as under the CLI
    try:
        job = freeze(cfg, str(cfg.run.root))
    except OmegaConfBaseException as exc:
        raise MltrainError(one_line(exc)) from None
    finally:
        if saved is not None:
            restore_singletons(saved)
    return dataclasses.replace(job, sweep_dir=None, sweep_index=None)
