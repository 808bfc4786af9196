"""Composing the members of a sweep (the first step of the launch path)."""
from __future__ import annotations

from typing import Any, List, Sequence

from omegaconf import DictConfig, open_dict


def is_mltrain_config(cfg: Any) -> bool:
    """mltrain's own app (job + compute + distribution + run), as opposed to a plain Hydra app on the launcher."""
    return all(k in cfg for k in ("job", "compute", "distribution", "run"))


def compose_members(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> List[DictConfig]:
    """One composed config per member. Members that choose the same group options share one
    composition of the defaults tree and differ only in their value overrides, applied as Hydra
    applies them; a 100-member sweep costs two compositions, not a hundred. This holds for a plain
    Hydra app on the launcher as for mltrain's own (Hydra's launcher conformance suites check it)."""
    loader = launcher.hydra_context.config_loader
    bases: dict = {}
    configs = []
    for i, overrides in enumerate(job_overrides):
        cfg = _compose_fast(launcher, loader, list(overrides), bases)
        _check_optional_groups(cfg, loader, bases)
        with open_dict(cfg):
            cfg.hydra.job.id = f"{cfg.hydra.job.name}_{initial_job_idx + i}"
            cfg.hydra.job.num = initial_job_idx + i
        configs.append(cfg)
    return configs


#: Groups the primary config lists as `optional`: Hydra skips a missing option there silently.
OPTIONAL_GROUPS = ("experiment", "pipeline")


def _check_optional_groups(cfg: DictConfig, loader: Any, bases: dict) -> None:
    """A named experiment that does not exist is refused (Hydra would run the defaults without it)."""
    from mltrain.errors import ConfigError

    choices = cfg.hydra.runtime.choices
    for group in OPTIONAL_GROUPS:
        chosen = choices.get(group)
        if chosen in (None, "null") or not is_mltrain_config(cfg):
            continue
        options = bases.setdefault(f"options:{group}", sorted(loader.get_group_options(group)))
        if chosen not in options:
            import difflib

            close = difflib.get_close_matches(str(chosen), options, n=3, cutoff=0.5)
            if not options:
                hint = f" (add {group}/{chosen}.yaml to ./.mltrain or ./conf)"
            else:
                hint = f" (closest: {', '.join(close)})" if close else ""
            raise ConfigError(group, f"'{chosen}' is not a known {group}{hint}", options or None)


def _compose_fast(launcher: Any, loader: Any, overrides: List[str], bases: dict) -> DictConfig:
    import copy

    from hydra._internal.config_loader_impl import ConfigLoaderImpl, get_overrides_dirname
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import read_write

    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = bases.get("choices")
    if choices is None:  # the first member tells which keys are config groups
        cfg = loader.load_sweep_config(launcher.config, overrides)
        bases["choices"] = set(cfg.hydra.runtime.choices.keys())
        return cfg
    groups = [o.input_line for o in parsed if o.key_or_group in choices or o.key_or_group.startswith("hydra")]
    values = [o for o in parsed if o.input_line not in groups]
    key = tuple(groups)
    if key not in bases:
        bases[key] = loader.load_sweep_config(launcher.config, groups)
    cfg = copy.deepcopy(bases[key])
    # Hydra's own last composition step: value overrides on top of the composed defaults tree
    # (a private helper, used so that +key, ++key and ~key behave exactly as in Hydra).
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.overrides.task = overrides
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=parsed, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep, exclude_keys=dirname.exclude_keys)
    return cfg
