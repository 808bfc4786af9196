"""Registers the schemas (mltrain.jobspec.schema; the job group's from mltrain.jobspec.kinds) in Hydra's ConfigStore
as `<name>_schema` nodes, the typed bases that every YAML preset under conf/ starts from.

Hydra's ConfigStore.store turns each dataclass into a DictConfig at once (OmegaConf.structured: about
1.5 ms each, 17 of them); one command composes 7 or 8. Each is stored instead as a node that becomes its
DictConfig the first time Hydra loads it, and once only."""
from __future__ import annotations

from typing import Any, List, Optional

from hydra.core.config_store import ConfigNode, ConfigStore
from omegaconf import OmegaConf

from mltrain.base.errors import ConfigError
from mltrain.jobspec import computes
from mltrain.jobspec.kinds import schemas
from mltrain.jobspec.schema import MltrainConf


class _LazySchema(ConfigNode):
    """A ConfigNode whose `node` is built on first use. ConfigStore.load shallow-copies the stored node and
    sets a deep copy of `node` on the copy: the copies share the one built DictConfig (`_built`), and a
    value set on a copy stays that copy's."""

    def __init__(self, name: str, group: Optional[str], schema: type) -> None:
        built: List[Any] = []
        self.__dict__.update(name=name, group=group, package=None, provider=None, _schema=schema, _built=built)

    @property  # type: ignore[override]
    def node(self) -> Any:
        if "_set" in self.__dict__:
            return self.__dict__["_set"]
        built = self.__dict__["_built"]
        if not built:
            node = OmegaConf.structured(self.__dict__["_schema"])
            if self.__dict__["_schema"] is MltrainConf:
                # Open while composing, so that a job kind's preset may add its sections (mltrain.jobspec.kinds.SECTIONS),
                # which are no fields of the root; Hydra closes the root once composed, before the command line's
                # values apply, and the validator refuses any other new top-level key.
                OmegaConf.set_struct(node, False)
            built.append(node)
        return built[0]

    @node.setter
    def node(self, value: Any) -> None:
        self.__dict__["_set"] = value


def _store(name: str, schema: type, group: Optional[str] = None) -> None:
    """What ConfigStore.store does (its repository: group folders of `<name>.yaml` nodes), without building."""
    folder = ConfigStore.instance().repo
    for part in group.split("/") if group else []:
        folder = folder.setdefault(part, {})
    folder[f"{name}.yaml"] = _LazySchema(f"{name}.yaml", group, schema)


class _ComputeGroup(dict):  # type: ignore[type-arg]  # Hydra's repository folders are plain dicts
    """The `compute` folder of ConfigStore's repository: a preset naming `<kind>_schema` of a compute kind an
    installed package provides (mltrain.jobspec.computes) finds it here. The packages' entry points are read
    only when such a name is looked up, not for every command (ConfigStore._open asks `name in folder`)."""

    def __contains__(self, key: object) -> bool:
        if dict.__contains__(self, key):
            return True
        if not isinstance(key, str) or not key.endswith("_schema.yaml"):
            return False
        kind = key[: -len("_schema.yaml")]
        if kind in computes.COMPUTES:
            return False
        schema = computes.compute_schema(kind)
        if schema is None:
            raise ConfigError("compute", f"'{kind}' is a compute kind no installed package provides (known: "
                                         f"{', '.join(computes.compute_kinds())}); install the backend's package")
        self[key] = _LazySchema(key, "compute", schema)
        return True


def loaded_external_schemas() -> bool:
    """Whether a compute schema of an installed package was looked up (mltrain.config.compose_cache keeps no
    composition that depends on another package's code)."""
    group = ConfigStore.instance().repo.get("compute")
    return isinstance(group, _ComputeGroup) and any(
        key.endswith("_schema.yaml") and key[: -len("_schema.yaml")] not in computes.COMPUTES for key in group)


def register() -> None:
    ConfigStore.instance().repo.setdefault("compute", _ComputeGroup())
    _store("mltrain_schema", MltrainConf)
    for group, nodes in schemas().items():
        for name, node in nodes.items():
            _store(f"{name}_schema", node, group)


register()
