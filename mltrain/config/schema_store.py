"""Registers the schemas (mltrain.spec.schema; the job group's from mltrain.spec.kinds) in Hydra's ConfigStore as `<name>_schema` nodes,
the typed bases that every YAML preset under conf/ starts from."""
from __future__ import annotations

from hydra.core.config_store import ConfigStore

from mltrain.spec.kinds import schemas
from mltrain.spec.schema import MltrainConf


def register() -> None:
    cs = ConfigStore.instance()
    cs.store(name="mltrain_schema", node=MltrainConf)
    for group, nodes in schemas().items():
        for name, node in nodes.items():
            cs.store(group=group, name=f"{name}_schema", node=node)


register()
