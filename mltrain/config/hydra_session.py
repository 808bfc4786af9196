"""Hydra as a library: its compose API initialized for the `mltrain` config, with a request's config folders
and in-memory config nodes, for the time of one block.

    with hydra_session(config_dirs, nodes) as compose:
        cfg = compose(["compute=slurm"])        # the config with its `hydra` node
        compose.loader                          # Hydra's config loader, for the runs' own compositions

Every composition of mltrain goes through here: a command and its engines (mltrain.command.app) and a
one-run request (mltrain.launch.request). Inside the block Hydra is initialized (`initialize_config_module`,
`hydra.job.name` that of the `mltrain` command), so an engine composes its runs through the same loader
(`GlobalHydra.instance().config_loader()`). Config folders and nodes reach Hydra through the composition's own
context (extra_config_dirs, config_nodes): no temporary file, no environment variable, no change of directory.
Afterwards Hydra's singletons (the global Hydra, JobRuntime, HydraConfig, the ConfigStore) are put back as the
caller had them (`isolate`: a Hydra app of the caller's own may share the process; the launcher conformance
suites run after in-process submissions in the test run) or only cleared. A session that is not isolated (no
other Hydra app in the process) keeps its compositions across commands (mltrain.config.compose_cache).
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, List, Optional, Sequence

from mltrain.config.memory_nodes import ConfigNode, config_nodes
from mltrain.config.paths import builtin_search_url, extra_config_dirs
from mltrain.config.sections import open_sections

#: `hydra.job.name` of the `mltrain` command: runs composed here are named as its runs are.
TASK_NAME = "main"
PRIMARY_CONFIG = "mltrain"
#: `@hydra.main(version_base=...)` of the `mltrain` command
VERSION_BASE = "1.3"



class Session:
    """compose(overrides): the `mltrain` config composed with those overrides (a section the chosen job kind
    lacks opened: mltrain.config.sections), its `hydra` node kept. `loader`: Hydra's config loader (its public
    `load_sweep_config` and `get_group_options`), through the kept compositions where the session keeps them."""

    def __init__(self, hydra_loader: Any, cache: Any) -> None:
        self.cache = cache
        self.loader: Any = hydra_loader if cache is None else _KeptLoader(hydra_loader, cache)

    def __call__(self, overrides: List[str]) -> Any:
        from hydra import compose  # startup

        overrides = open_sections(overrides)
        kept = self.cache.get(PRIMARY_CONFIG, overrides) if self.cache is not None else None
        if kept is not None:
            return kept
        cfg = compose(config_name=PRIMARY_CONFIG, overrides=overrides, return_hydra_config=True)
        if self.cache is not None:
            self.cache.put(PRIMARY_CONFIG, overrides, cfg)
        return cfg


class _KeptLoader:
    """Hydra's config loader with `load_sweep_config` answered from the kept compositions when it can: the same
    composition Hydra's own makes (`load_configuration` of the command's hydra overrides and the run's, then the
    command's resolver cache copied in, so `${now:...}` is the command's), kept before that copy."""

    def __init__(self, loader: Any, cache: Any) -> None:
        self._loader, self._cache = loader, cache

    def load_sweep_config(self, master: Any, overrides: List[str]) -> Any:
        from hydra.types import RunMode  # startup
        from omegaconf import OmegaConf  # startup

        name = str(master.hydra.job.config_name)
        full = [*OmegaConf.to_container(master.hydra.overrides.hydra), *overrides]
        cfg = self._cache.get(name, full)
        if cfg is None:
            cfg = self._loader.load_configuration(config_name=name, overrides=full, run_mode=RunMode.RUN)
            self._cache.put(name, full, cfg)
        OmegaConf.copy_cache(from_config=master, to_config=cfg)
        return cfg

    def get_group_options(self, *args: Any, **kwargs: Any) -> Any:
        return self._loader.get_group_options(*args, **kwargs)


@contextlib.contextmanager
def hydra_session(config_dirs: Sequence[str] = (), nodes: Sequence[ConfigNode] = (),
                  isolate: bool = True) -> Iterator[Session]:
    """Yields the Session: compose(overrides) and its loader."""
    from hydra import initialize_config_dir, initialize_config_module  # startup
    from hydra.core.global_hydra import GlobalHydra  # startup
    from hydra.core.utils import setup_globals  # startup

    from mltrain.config import schema_store  # noqa: F401  (registers the typed schemas)  # startup
    from mltrain.config.hydra_internals import restore_singletons, saved_singletons  # startup

    # the `now` and `hydra` resolvers, before the state is saved: putting it back restores OmegaConf's resolvers
    # too, and the config composed here is resolved after the block
    setup_globals()
    saved = saved_singletons() if isolate else None
    if GlobalHydra.instance().is_initialized():  # a caller's own Hydra app or an earlier composition
        GlobalHydra.instance().clear()
    url = builtin_search_url()
    try:
        # Hydra builds the search path as it initializes, and reads the ConfigStore as it composes
        with extra_config_dirs(config_dirs), config_nodes(nodes):
            init = (initialize_config_module(url[len("pkg://"):], job_name=TASK_NAME, version_base=VERSION_BASE)
                    if url.startswith("pkg://") else
                    initialize_config_dir(url, job_name=TASK_NAME, version_base=VERSION_BASE))
            with init:
                loader = GlobalHydra.instance().config_loader()
                cache: Optional[Any] = None
                if not isolate:
                    from mltrain.config import compose_cache  # startup

                    if compose_cache.enabled():
                        cache = compose_cache.ComposeCache(loader, nodes)
                yield Session(loader, cache)
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            restore_singletons(saved)
