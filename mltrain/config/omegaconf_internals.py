"""Every use mltrain makes of OmegaConf's internals, in one place, each with why; nothing else in mltrain touches a
private name of OmegaConf (tests/unit/test_fences.py holds that). Checked against omegaconf 2.3.1.

- `custom_resolvers` / `add_resolvers`: a plain Hydra app's custom resolvers (`OmegaConf.register_new_resolver`
  in the app's module) go with its task function to the rank processes, which run the task without importing
  that module's top (mltrain.launch.hydra_app, mltrain.ranks.hydra_app_rank). OmegaConf keeps them in
  `BaseContainer._resolvers`, already wrapped for its resolver calls; it has no public way to list them
  (`OmegaConf.has_resolver` asks for one name), and `register_new_resolver` would wrap a wrapped one again.
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from omegaconf.basecontainer import BaseContainer

CHECKED_AGAINST = {"omegaconf": "2.3.1"}


def custom_resolvers() -> Dict[str, Callable[..., Any]]:
    """Every resolver registered in this process, by name, as OmegaConf holds it."""
    return dict(BaseContainer._resolvers)


def add_resolvers(resolvers: Dict[str, Callable[..., Any]]) -> None:
    """Resolvers taken from `custom_resolvers()` in another process, registered here; one already here stays."""
    for name, fn in resolvers.items():
        BaseContainer._resolvers.setdefault(name, fn)
