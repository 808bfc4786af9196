"""Composing the members of a sweep (the first step of the launch path)."""
from __future__ import annotations

from typing import Any, List, Optional, Sequence

from omegaconf import DictConfig, open_dict


def is_mltrain_config(cfg: Any) -> bool:
    """mltrain's own app (job + compute + distribution + run), as opposed to a plain Hydra app on the launcher."""
    return all(k in cfg for k in ("job", "compute", "distribution", "run"))


def compose_members(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
                    bases: Optional[dict] = None) -> List[DictConfig]:
    """One composed config per member. Members that choose the same group options share one
    composition of the defaults tree and differ only in their value overrides, applied as Hydra
    applies them; a 100-member sweep costs two compositions, not a hundred. This holds for a plain
    Hydra app on the launcher as for mltrain's own (Hydra's launcher conformance suites check it).
    `bases` carries those compositions across calls (a pipeline's steps, a HyperDrive sweep's members);
    seeded with {"choices": the group keys of an already composed config}, even the first member
    composes only its group choices."""
    loader = launcher.hydra_context.config_loader
    bases = {} if bases is None else bases
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

    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    choices = bases.get("choices")
    if choices is None:  # the first member tells which keys are config groups
        cfg = _master_copy(launcher, parsed)
        if cfg is None:
            cfg = loader.load_sweep_config(launcher.config, overrides)
        else:
            _name_overrides(cfg, overrides, parsed)
        bases["choices"] = set(cfg.hydra.runtime.choices.keys())
        return cfg
    groups = [o.input_line for o in parsed if _is_group(o.key_or_group, choices, loader, bases)]
    values = [o for o in parsed if o.input_line not in groups]
    key = tuple(groups)
    if key not in bases:
        bases[key] = loader.load_sweep_config(launcher.config, groups)
    cfg = copy.deepcopy(bases[key])
    # Hydra's own last composition step: value overrides on top of the composed defaults tree
    # (a private helper, used so that +key, ++key and ~key behave exactly as in Hydra).
    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
    _name_overrides(cfg, overrides, parsed)
    return cfg


def _master_copy(launcher: Any, parsed: list) -> Optional[DictConfig]:
    """A member whose overrides are the command line's own (a lone run): Hydra has just composed
    exactly this config for the sweeper, so a copy of it saves a composition on every command."""
    import copy

    from hydra.core.override_parser.overrides_parser import OverridesParser

    master = getattr(launcher, "config", None)
    if master is None:
        return None
    task = OverridesParser.create().parse_overrides(list(master.hydra.overrides.task))

    def meaning(found: list) -> list:
        return [(o.type, o.key_or_group, o.package, o.value()) for o in found]

    if any(o.is_sweep_override() for o in task) or meaning(task) != meaning(parsed):
        return None
    return copy.deepcopy(master)


def _name_overrides(cfg: DictConfig, overrides: List[str], parsed: list) -> None:
    from hydra._internal.config_loader_impl import get_overrides_dirname
    from omegaconf import read_write

    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.overrides.task = overrides
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = get_overrides_dirname(
            overrides=parsed, kv_sep=dirname.kv_sep, item_sep=dirname.item_sep, exclude_keys=dirname.exclude_keys)


def _is_group(key: str, choices: set, loader: Any, bases: dict) -> bool:
    """A config group: one the composed config chose from, or any other the search path holds (a
    group only a step or member names, such as a preset's own subgroup)."""
    if key in choices or key.startswith("hydra"):
        return True
    if f"group:{key}" not in bases:
        bases[f"group:{key}"] = "." not in key and bool(loader.get_group_options(key))
    return bases[f"group:{key}"]
