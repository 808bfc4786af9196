"""Config options held in memory: a front end's generated config groups (a v2 job file's `azureml_job/NAME`,
its pipeline's `pipeline/NAME`) given to Hydra through its ConfigStore instead of files in a temporary
folder. Hydra's search path always holds the ConfigStore (`structured://`), so `+azureml_job=NAME` finds one
as it would find a file of the same group and name.

A sweep keeps them as files in its own folder (`write_nodes`): `mltrain runs resume SWEEP` composes the
members again from what the sweep recorded, after this process is gone.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

from mltrain.base.atomic import atomic_write


@dataclass(frozen=True)
class ConfigNode:
    """One option of a config group: `group/name` with these values. `package`: Hydra's package of the
    option (`_global_` for values that sit at the top of the config, as a file's `# @package _global_`);
    None for the group's own (a `pipeline/NAME` under `pipeline`)."""

    group: str
    name: str
    values: Dict[str, Any]
    package: Optional[str] = None

    @property
    def relative_path(self) -> str:
        return f"{self.group}/{self.name}.yaml"


_NODES: contextvars.ContextVar[Tuple[ConfigNode, ...]] = contextvars.ContextVar("mltrain_config_nodes", default=())


def store_node(node: ConfigNode) -> None:
    """One more option in Hydra's ConfigStore for the compositions of the session under way (a pipeline step's
    values: mltrain.pipelines); gone with the session's state."""
    from hydra.core.config_store import ConfigStore  # startup

    ConfigStore.instance().store(group=node.group, name=node.name, node=node.values, package=node.package,
                                 provider="mltrain")


@contextlib.contextmanager
def config_nodes(nodes: Sequence[ConfigNode]) -> Iterator[None]:
    """The nodes in Hydra's ConfigStore while this block composes (in this thread, as extra_config_dirs); the
    caller puts Hydra's state back where another Hydra app shares the process (restore_singletons)."""

    for node in nodes:
        store_node(node)
    token = _NODES.set(tuple(nodes))
    try:
        yield
    finally:
        _NODES.reset(token)


def current_nodes() -> Tuple[ConfigNode, ...]:
    """The in-memory options of the composition in progress (none outside a `config_nodes` block)."""
    return _NODES.get()


def write_nodes(nodes: Sequence[ConfigNode], folder: Path) -> None:
    """The nodes as the config files they stand for, under `folder` (a config folder of their groups)."""
    import yaml  # startup

    for node in nodes:
        head = f"# @package {node.package}\n" if node.package else ""
        (folder / node.relative_path).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / node.relative_path, head + yaml.safe_dump(node.values, sort_keys=False))
