"""Environments: the curated `AzureML-*` catalog, custom specs, and their materialization."""
from mltrain.environments.catalog import CURATED
from mltrain.environments.spec import EnvironmentSpec, from_config

__all__ = ["CURATED", "EnvironmentSpec", "from_config", "load"]


def load(directory) -> EnvironmentSpec:
    """An environment saved with EnvironmentSpec.save / `mltrain env save`."""
    return EnvironmentSpec.load(directory)
