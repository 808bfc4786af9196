"""Every use mltrain makes of Hydra's private modules and names, in one place, each with why and, where there
is one, the Hydra issue whose fix would let it go. Nothing else in mltrain (or its launcher plugin) imports
`hydra._internal` or touches a private name of Hydra (tests/unit/test_fences.py holds that). Checked against
hydra-core 1.3.8.

- `BasicSweeper`: Hydra ships its basic sweeper only under `hydra._internal.core_plugins`; the mltrain
  sweeper is that sweeper with its pre-launch composition of every member left to the launcher
  (hydra#1324: startup of large sweeps), so it subclasses it rather than copying its loop.
- `apply_value_overrides`: Hydra's last composition step (value overrides applied on top of a composed
  defaults tree) has no public entry point. A sweep's members that differ only in values are copies of
  the config composed once, with their values applied by Hydra's own step, so `+key`, `++key` and `~key`
  behave exactly as in Hydra without composing each member again (hydra#1543: composing many configs).
- `overrides_dirname`: `hydra.job.override_dirname` of such a member, computed as Hydra computes it.
- `restore_singletons`: `Singleton.set_state` finds every installed plugin again each time it puts Hydra's
  state back (about 0.1 s): composing a job request in-process saves and restores that state twice, and
  a packed worker's fork restores it per member. The plugins this process found already are kept.
- `failed_job_error`: the exception a failed job's `JobReturn` holds (`_return_value`). Its public getter,
  `return_value`, raises it and first writes "Error executing job with overrides: ..." to stderr; a plain Hydra
  app's rank prints the traceback alone, as before (mltrain.ranks.hydra_app_rank). Setting it is public.
- `value_as_override_text`: a sampled value as the text after `=` in an override (`Override`'s static
  `_get_value_element_as_str`; the public `get_value_element_as_str` needs a parsed Override around the value).
  It is the grammar's inverse: a string with spaces or commas comes back quoted, so the override parses back to
  the same value (mltrain.sweeps.space.override_for).
- `skip_sweepers_batch_check`: Hydra's sweepers compose every member of a batch once to check it
  (`Sweeper.validate_batch_is_legal`, a method with no setting to turn it off) before the launcher sees the batch.
  mltrain's launcher composes and checks every member itself before it starts any (mltrain.launch.members), so that
  first composition only doubled the work: 40 s of a 1,000-member packed sweep of a plain app on Slurm, before its
  first member ran (hydra#1324; `hydra/sweeper=mltrain` skips it too). The method is replaced once per process by
  one that skips the check for a sweeper whose launcher is mltrain's; any other launcher's sweeps are checked as
  before.
- `args_parser`: Hydra's command-line parser (`hydra._internal.utils.get_args_parser`, what `@hydra.main` parses
  argv with). `mltrain` composes with the compose API and reads most of its command line itself; it parses argv
  with Hydra's own parser first, so a flag's usage error (`--cfg` with no value) is the one a plain Hydra app gives.
"""
from __future__ import annotations

import argparse
import importlib
from typing import Any, List

from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
from hydra._internal.sources_registry import SourcesRegistry
from hydra._internal.utils import get_args_parser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn

__all__ = ["apply_value_overrides", "args_parser", "failed_job_error", "overrides_dirname", "restore_singletons", "saved_singletons",
           "skip_sweepers_batch_check", "value_as_override_text"]

CHECKED_AGAINST = {"hydra-core": "1.3.8"}


def __getattr__(name: str) -> Any:
    """BasicSweeper and its config, looked up when the sweeper plugin asks: Hydra's plugin scan executes
    the modules under hydra._internal.core_plugins again, so a class taken from them before the scan is
    not the one the scan's instances belong to (`super()` then fails inside BasicSweeper)."""
    if name in ("BasicSweeper", "BasicSweeperConf"):
        return getattr(importlib.import_module("hydra._internal.core_plugins.basic_sweeper"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def apply_value_overrides(overrides: List[Any], cfg: Any) -> None:
    """Hydra's own application of parsed value overrides to a composed config, in place."""
    ConfigLoaderImpl._apply_overrides_to_config(overrides, cfg)


def overrides_dirname(overrides: List[Any], kv_sep: str, item_sep: str, exclude_keys: List[str]) -> str:
    return str(get_overrides_dirname(overrides=overrides, kv_sep=kv_sep, item_sep=item_sep, exclude_keys=exclude_keys))


def saved_singletons() -> Any:
    """Hydra's `Singleton.get_state()`, noting whether this process had found its plugins by then."""
    return {"state": Singleton.get_state(), "scanned": Plugins in Singleton._instances}


def restore_singletons(saved: Any) -> None:
    """Hydra's `Singleton.set_state`, keeping the plugins this process has found instead of scanning every
    installed plugin again, where the saved state was taken after they were found (its ConfigStore then
    holds what the plugins' modules stored; one taken before has them found, and stored, again)."""
    state = saved["state"]
    # the config sources (pkg://, file://) are registered by the plugins' scan: kept with them
    found = {kind: Singleton._instances[kind] for kind in (Plugins, SourcesRegistry) if kind in Singleton._instances}
    if saved["scanned"] and Plugins in found:
        state = {**state, "instances": {**state["instances"], **found}}
    Singleton.set_state(state)


def failed_job_error(ret: JobReturn) -> BaseException:
    """The exception a failed job ended with, without the line Hydra's `return_value` writes before raising it."""
    error = ret._return_value
    assert isinstance(error, BaseException), error
    return error


def value_as_override_text(value: Any) -> str:
    """A value (str, int, float, bool, None, a list or dict of them) as Hydra's override grammar writes it."""
    return str(Override._get_value_element_as_str(value))


def args_parser() -> argparse.ArgumentParser:
    """A new instance of the parser a plain `@hydra.main` app reads its command line with."""
    return get_args_parser()


_batch_check_skipped: List[type] = []


def skip_sweepers_batch_check(launcher: type) -> None:
    """Sweepers whose launcher is a `launcher` no longer compose each member of a batch to check it (see above)."""
    from hydra.plugins.sweeper import Sweeper  # plugin

    if launcher in _batch_check_skipped:
        return
    _batch_check_skipped.append(launcher)
    checked = Sweeper.validate_batch_is_legal

    def validate_batch_is_legal(self: Any, batch: Any) -> None:
        if not isinstance(getattr(self, "launcher", None), launcher):
            checked(self, batch)

    Sweeper.validate_batch_is_legal = validate_batch_is_legal  # type: ignore[method-assign]
