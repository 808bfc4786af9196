"""A sweep's settings (the `sweep` node, mltrain.jobspec.schema.SweepConf), checked against Azure ML
HyperDrive's rules before anything runs: each refused combination is one ConfigError line."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional

from mltrain.base.errors import ConfigError
from mltrain.jobspec.schema import EarlyTerminationConf, SweepConf

SAMPLINGS = ("grid", "random", "sobol", "bayesian")
GOALS = ("maximize", "minimize")
POLICIES = ("none", "bandit", "median_stopping", "truncation_selection")
#: The keys each policy reads besides evaluation_interval and delay_evaluation.
POLICY_KEYS = {
    "none": (),
    "bandit": ("slack_factor", "slack_amount"),
    "median_stopping": (),
    "truncation_selection": ("truncation_percentage", "exclude_finished_runs"),
}


def from_config(values: Dict[str, Any]) -> SweepConf:
    """Typed settings from the composed config's `sweep` node (plain data)."""
    values = dict(values or {})
    policy = EarlyTerminationConf(**dict(values.pop("early_termination", None) or {}))
    return SweepConf(**values, early_termination=policy)


def is_hyperdrive(sweep: SweepConf) -> bool:
    """Whether `-m` runs as a HyperDrive sweep: any sweep key set away from its default."""
    defaults = SweepConf()
    return any(getattr(sweep, f.name) != getattr(defaults, f.name) for f in dataclasses.fields(SweepConf))


def check(sweep: SweepConf) -> SweepConf:
    """Refuse what Azure ML refuses; returns the settings with `sampling` filled in."""
    sampling = sweep.sampling or "grid"
    _one_of("sweep.sampling", sampling, SAMPLINGS)
    _one_of("sweep.goal", sweep.goal, GOALS)
    policy = sweep.early_termination
    _one_of("sweep.early_termination.policy", policy.policy, POLICIES)
    for key, value, allowed in (("max_total_runs", sweep.max_total_runs, ">= 1"),
                                ("max_concurrent_runs", sweep.max_concurrent_runs, ">= 1")):
        if value is not None and value < 1:
            raise ConfigError(f"sweep.{key}", f"{value} is invalid; must be {allowed}")
    if sweep.max_duration_minutes is not None and sweep.max_duration_minutes <= 0:
        raise ConfigError("sweep.max_duration_minutes", f"{sweep.max_duration_minutes} is invalid; must be > 0")
    if sampling != "grid" and sweep.max_total_runs is None:
        raise ConfigError("sweep.max_total_runs", f"sweep.sampling={sampling} needs a number of runs (grid stops when "
                                                  "its points run out; other samplings do not)")
    if policy.policy != "none":
        _check_policy(policy, sampling)
        if not sweep.primary_metric:
            raise ConfigError("sweep.primary_metric", f"early termination ({policy.policy}) needs a primary metric to "
                                                      "compare members by")
    else:
        _no_stray_keys(policy, "none")
    if sampling == "bayesian" and not sweep.primary_metric:
        raise ConfigError("sweep.primary_metric", "bayesian sampling needs a primary metric to learn from")
    return dataclasses.replace(sweep, sampling=sampling)


def _check_policy(policy: EarlyTerminationConf, sampling: str) -> None:
    key = "sweep.early_termination"
    if sampling == "bayesian":
        raise ConfigError(f"{key}.policy", f"{policy.policy}: bayesian sampling takes no early termination (Azure ML "
                                           "refuses the combination: stopped members would mislead the model)", ("none",))
    if policy.evaluation_interval < 1:
        raise ConfigError(f"{key}.evaluation_interval", f"{policy.evaluation_interval} is invalid; must be >= 1")
    if policy.delay_evaluation < 0:
        raise ConfigError(f"{key}.delay_evaluation", f"{policy.delay_evaluation} is invalid; must be >= 0")
    _no_stray_keys(policy, policy.policy)
    if policy.policy == "bandit":
        given = [k for k in ("slack_factor", "slack_amount") if getattr(policy, k) is not None]
        if len(given) != 1:
            raise ConfigError(f"{key}.slack_factor", "bandit takes exactly one of slack_factor and slack_amount, "
                                                     f"got {' and '.join(given) or 'neither'}")
        if getattr(policy, given[0]) <= 0:
            raise ConfigError(f"{key}.{given[0]}", f"{getattr(policy, given[0])} is invalid; must be > 0")
    if policy.policy == "truncation_selection":
        pct = policy.truncation_percentage
        if pct is None or not 1 <= pct <= 99:
            raise ConfigError(f"{key}.truncation_percentage", f"{pct} is invalid; must be an integer from 1 to 99")


def _no_stray_keys(policy: EarlyTerminationConf, name: str) -> None:
    defaults = EarlyTerminationConf()
    for key in ("slack_factor", "slack_amount", "truncation_percentage", "exclude_finished_runs"):
        if key not in POLICY_KEYS[name] and getattr(policy, key) != getattr(defaults, key):
            users = [p for p, keys in POLICY_KEYS.items() if key in keys]
            raise ConfigError(f"sweep.early_termination.{key}", f"is not read by policy {name} (it belongs to "
                                                                f"{', '.join(users)})")


def _one_of(key: str, value: Optional[str], allowed) -> None:
    if value not in allowed:
        raise ConfigError(key, f"'{value}' is not supported", list(allowed))
