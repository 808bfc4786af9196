"""Composing the members of a sweep (the first step of the launch path)."""
from __future__ import annotations

import copy
import difflib
import pickle
from typing import Any, List, Optional, Sequence

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from mltrain.base.errors import ConfigError
from mltrain.config.hydra_internals import apply_value_overrides, overrides_dirname
from mltrain.config.sections import open_sections


def is_mltrain_config(cfg: Any) -> bool:
    """mltrain's own app (job + compute + distribution + run), as opposed to a plain Hydra app on the launcher."""
    return all(k in cfg for k in ("job", "compute", "distribution", "run"))


def compose_members(config: Any, loader: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
                    bases: Optional[dict] = None) -> List[DictConfig]:
    """One composed config per member. Members that choose the same group options share one
    composition of the defaults tree and differ only in their value overrides, applied as Hydra
    applies them; a 100-member sweep costs two compositions, not a hundred. This holds for a plain
    Hydra app on the launcher as for mltrain's own (Hydra's launcher conformance suites check it).
    `config` is the command's own composed config (the sweep's fixed overrides), `loader` Hydra's config loader
    that composed it (hydra.core.config_loader.ConfigLoader: `load_sweep_config`, `get_group_options`).
    `bases` carries those compositions across calls (a pipeline's steps, a HyperDrive sweep's members)."""
    bases = {} if bases is None else bases
    configs = []
    for i, overrides in enumerate(job_overrides):
        cfg = _compose_fast(config, loader, open_sections(overrides), bases)
        _check_optional_groups(cfg, loader, bases)
        with open_dict(cfg):
            cfg.hydra.job.id = f"{cfg.hydra.job.name}_{initial_job_idx + i}"
            cfg.hydra.job.num = initial_job_idx + i
        configs.append(cfg)
    return configs


def uses_hydra_resolver(cfg: DictConfig) -> bool:
    """Whether the job's own part of the config reads `${hydra:...}` (then HydraConfig must hold this member
    when it is frozen)."""
    def raw(value: Any) -> Any:  # unresolved: reading the value would resolve it, before HydraConfig is set
        return OmegaConf.to_container(value, resolve=False) if OmegaConf.is_config(value) else value

    return any("hydra:" in str(raw(value)) for key, value in cfg.items_ex(resolve=False) if key != "hydra")


#: Groups the primary config lists as `optional`: Hydra skips a missing option there silently.
OPTIONAL_GROUPS = ("experiment", "pipeline")


def _check_optional_groups(cfg: DictConfig, loader: Any, bases: dict) -> None:
    """A named experiment that does not exist is refused (Hydra would run the defaults without it)."""
    choices = cfg.hydra.runtime.choices
    for group in OPTIONAL_GROUPS:
        chosen = choices.get(group)
        if chosen in (None, "null") or not is_mltrain_config(cfg):
            continue
        options = bases.setdefault(f"options:{group}", sorted(loader.get_group_options(group)))
        if chosen not in options:
            close = difflib.get_close_matches(str(chosen), options, n=3, cutoff=0.5)
            if not options:
                hint = f" (add {group}/{chosen}.yaml to ./.mltrain or ./conf)"
            else:
                hint = f" (closest: {', '.join(close)})" if close else ""
            raise ConfigError(group, f"'{chosen}' is not a known {group}{hint}", options or None)


def _compose_fast(config: Any, loader: Any, overrides: List[str], bases: dict) -> DictConfig:
    parsed = _parse(overrides, bases)
    cfg = _from_master(config, loader, parsed, bases)
    bases["last_from_master"] = cfg is not None  # mltrain.launch.deferred asks, of a sweep's first member
    if cfg is None:
        choices = bases.get("choices")
        if choices is None:  # no config composed for the sweeper: the first member tells which keys are groups
            cfg = loader.load_sweep_config(config, overrides)
            bases["choices"] = set(cfg.hydra.runtime.choices.keys())
            return cfg
        groups = [o.input_line for o in parsed if _is_group(o.key_or_group, choices, loader, bases)]
        values = [o for o in parsed if o.input_line not in groups]
        key = tuple(groups)
        if key not in bases:
            bases[key] = _Frozen(loader.load_sweep_config(config, groups))
        cfg = bases[key].copy()
        apply_value_overrides(values, cfg)  # Hydra's own last step (mltrain.config.hydra_internals)
    _name_overrides(cfg, overrides, parsed)
    return cfg


def compose_value_member(bases: dict, overrides: List[str], index: int) -> DictConfig:
    """A member of a sweep over values, composed where only `master_bases(bases)` of its driver is at hand (a
    Slurm worker making a deferred member: mltrain.launch.deferred): a copy of the command's composed config
    with the member's values applied, as `compose_members` makes it in the driver."""
    parsed = _parse(overrides, bases)
    cfg = _from_master(None, None, parsed, bases)
    if cfg is None:  # the driver defers only members whose keys are the first member's
        raise ConfigError("hydra.overrides.task", f"member {index} ({' '.join(overrides)}) chooses config groups; "
                                                  "it cannot be made from the sweep's first member")
    _name_overrides(cfg, overrides, parsed)
    with open_dict(cfg):
        cfg.hydra.job.id = f"{cfg.hydra.job.name}_{index}"
        cfg.hydra.job.num = index
    return cfg


def master_bases(bases: dict, sweep_dir: str) -> dict:
    """What `compose_value_member` needs of a driver's `bases`, as plain picklable data: the command's composed
    config and which keys are groups (not the parsed overrides' cache, nor the groups' compositions). The
    sweep's folder is pinned as resolved here: `${now:...}` elsewhere, later, would name another one."""
    out = {k: v for k, v in bases.items() if isinstance(k, str) and k != "parsed"}
    frozen, fixed, fixed_keys = bases["master"]
    master = frozen.copy()
    with read_write(master.hydra), open_dict(master.hydra):
        master.hydra.sweep.dir = sweep_dir
    out["master"] = (_Frozen(master), fixed, fixed_keys)
    return out


def parse_overrides(overrides: Sequence[str], bases: dict) -> list:
    """Hydra's parse of each override, once per distinct string for a command (kept in `bases`, the Composer's): the
    command's own config, the expansion of its sweep and each member's composition read the same parse (a 100-member
    sweep repeats all but one)."""
    return _parse(list(overrides), bases)


def _parse(overrides: List[str], bases: dict) -> list:
    """Hydra's parse of each override, once per distinct string (a 100-member sweep repeats all but one)."""
    cache = bases.setdefault("parsed", {})
    missing = [line for line in dict.fromkeys(overrides) if line not in cache]
    if missing:
        cache.update(zip(missing, OverridesParser.create().parse_overrides(missing)))
    return [cache[line] for line in overrides]


def _meaning(override: Any) -> tuple:
    return override.type, override.key_or_group, override.package, override.value()


def _from_master(master: Any, loader: Any, parsed: list, bases: dict) -> Optional[DictConfig]:
    """The config Hydra composed for the sweeper holds the command line's fixed overrides (a sweep's
    ranges are left out). A member that is those plus values for other keys (a lone run; any member
    of a sweep over values) is a copy of it with those values applied: no composition at all."""
    if "master" not in bases:
        bases["master"] = None
        if master is not None and "hydra" in master:
            task = OmegaConf.to_container(master.hydra.overrides.task, resolve=False)  # as typed: `${hydra:..}` too
            fixed = [o for o in _parse(list(task), bases) if not o.is_sweep_override()]
            bases["master"] = (_Frozen(master), [_meaning(o) for o in fixed], {o.key_or_group for o in fixed})
            # Its group keys tell the others apart, so no member composes in full just to learn them.
            bases["choices"] = set(master.hydra.runtime.choices.keys())
    if bases["master"] is None:
        return None
    frozen, fixed, fixed_keys = bases["master"]
    choices = bases["choices"]
    rest, pending = [], list(fixed)
    for o in parsed:
        meaning = _meaning(o)
        if meaning in pending:
            pending.remove(meaning)
        elif o.key_or_group in fixed_keys or _is_group(o.key_or_group, choices, loader, bases):
            return None  # a group choice, or a key the fixed overrides also set: compose
        else:
            rest.append(o)
    if pending:
        return None
    cfg = frozen.copy()
    apply_value_overrides(rest, cfg)
    return cfg


class _Frozen:
    """A composed config kept as bytes: unpickling one is several times faster than deep-copying it."""

    def __init__(self, cfg: DictConfig) -> None:
        try:
            self._bytes, self._cfg = pickle.dumps(cfg), None
        except Exception:  # a plain Hydra app's config may hold objects pickle refuses
            self._bytes, self._cfg = None, cfg

    def copy(self) -> DictConfig:
        return pickle.loads(self._bytes) if self._bytes is not None else copy.deepcopy(self._cfg)


def _name_overrides(cfg: DictConfig, overrides: List[str], parsed: list) -> None:
    with read_write(cfg.hydra), open_dict(cfg.hydra):
        cfg.hydra.overrides.task = overrides
        dirname = cfg.hydra.job.config.override_dirname
        cfg.hydra.job.override_dirname = overrides_dirname(parsed, dirname.kv_sep, dirname.item_sep,
                                                           list(dirname.exclude_keys))


def _is_group(key: str, choices: set, loader: Any, bases: dict) -> bool:
    """A config group: one the composed config chose from, or any other the search path holds (a
    group only a step or member names, such as a preset's own subgroup)."""
    if key in choices or key.startswith("hydra"):
        return True
    if f"group:{key}" not in bases:
        bases[f"group:{key}"] = "." not in key and bool(loader.get_group_options(key))
    return bases[f"group:{key}"]
