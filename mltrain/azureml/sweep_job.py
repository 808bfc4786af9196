"""A sweep job (reference-yaml-job-sweep) mapped onto mltrain's HyperDrive sweep (mltrain.sweeps):
the trial is a command job whose `${{search_space.X}}` reads the member's value, the search space
becomes `sweep.params` with Azure's meaning, and sampling, objective, early termination and limits
become the `sweep` node. Azure's refusals hold here, each as one line naming the field, before
anything runs; the sweep engine checks them again with its own names.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from mltrain.azureml import command_job, component_files, expressions
from mltrain.azureml.v2_schema import (
    COMMAND,
    GOALS,
    LIMITS_SWEEP,
    OBJECTIVE,
    POLICY_KEYS,
    RANDOM_RULES,
    SAMPLING_KEYS,
    SAMPLINGS,
    SEARCH_TYPES,
    SWEEP,
    check_fields,
    number,
    one_of,
    text,
)
from mltrain.azureml.yaml_lines import JobFile
from mltrain.sweeps.space import override_for

#: What each sampling algorithm takes (Azure: grid only choice; bayesian choice, uniform, quniform).
ALLOWED = {"grid": ("choice",), "bayesian": ("choice", "uniform", "quniform"), "random": tuple(SEARCH_TYPES)}
#: Azure's default when limits.max_total_trials is not given.
DEFAULT_TOTAL_TRIALS = 1000
PARAM_PREFIX = "job.params."


@dataclass
class SweepJob:
    trial: command_job.CommandJob
    space: Dict[str, Dict[str, Any]]
    sampling: str                                  # random | sobol | grid | bayesian (mltrain's names)
    seed: Optional[int]
    goal: str
    primary_metric: str
    policy: Dict[str, Any] = field(default_factory=dict)
    max_total_trials: Optional[int] = None
    max_concurrent_trials: Optional[int] = None
    timeout_s: Optional[float] = None


def parse(jf: JobFile, where: Sequence[Any], data: Dict[str, Any], ctx: command_job.Context,
          known: Sequence[str] = SWEEP) -> SweepJob:
    where = tuple(where)
    data = check_fields(jf, where, data, known)
    for required in ("trial", "search_space", "objective", "sampling_algorithm"):
        if data.get(required) is None:
            raise jf.error(where + (required,), "is required in a sweep job")
    space = _space(jf, where + ("search_space",), data["search_space"])
    sampling, seed = _sampling(jf, where + ("sampling_algorithm",), data["sampling_algorithm"])
    for name, spec in space.items():
        allowed = ALLOWED["random" if sampling == "sobol" else sampling]
        if spec["type"] not in allowed:
            raise jf.error(where + ("search_space", name, "type"),
                           f"{spec['type']} cannot be sampled by {sampling} sampling, which takes "
                           f"{', '.join(allowed)} (Azure ML refuses the combination)")
    objective = check_fields(jf, where + ("objective",), data["objective"], OBJECTIVE)
    goal = one_of(jf, where + ("objective", "goal"), objective.get("goal"), GOALS)
    metric = text(jf, where + ("objective", "primary_metric"), objective.get("primary_metric"))
    policy = _policy(jf, where + ("early_termination",), data.get("early_termination"))
    if policy and sampling == "bayesian":
        raise jf.error(where + ("early_termination",), "bayesian sampling takes no early termination policy "
                                                       "(Azure ML refuses the combination)")
    limits = check_fields(jf, where + ("limits",), data.get("limits"), LIMITS_SWEEP)
    if limits.get("max_total_trials") is None:  # Azure's loader requires it (no default of 1000 there)
        raise jf.error(where + ("limits", "max_total_trials") if limits else where + ("limits",),
                       "is required in a sweep job (limits.max_total_trials)")
    lim = {k: number(jf, where + ("limits", k), v, k != "timeout" and k != "trial_timeout", 1)
           for k, v in limits.items() if v is not None}
    trial = _trial(jf, where, data, ctx, lim.get("trial_timeout"), list(space))
    for ref in _search_refs(trial):
        if ref not in space:
            raise jf.error(where + ("trial", "command"), f"${{{{search_space.{ref}}}}}: no parameter '{ref}' in "
                                                         f"search_space ({', '.join(space)})")
    return SweepJob(trial, space, sampling, seed, goal, metric, policy, lim.get("max_total_trials"),
                    lim.get("max_concurrent_trials"), lim.get("timeout"))


def _trial(jf: JobFile, where: tuple, data: Dict[str, Any], ctx: command_job.Context,
           trial_timeout: Optional[float], space: Sequence[str] = ()) -> command_job.CommandJob:

    raw = data["trial"]
    inherited = {"compute": data.get("compute")}
    if isinstance(raw, str):  # a command component file
        component = component_files.load_component(jf, where + ("trial",), raw)
        # a component's inputs named in the search space take each trial's value (Azure's binding)
        trial = component_files.bind(component, jf, where, data.get("inputs"), data.get("outputs"), ctx, inherited,
                                     searched=space)
    else:
        body = dict(check_fields(jf, where + ("trial",), raw, COMMAND))
        # A sweep's inputs and outputs are its trial's (`${{inputs.A}}` in the trial's command).
        for port in ("inputs", "outputs"):
            if data.get(port) is not None:
                body[port] = data[port]
        trial = command_job.parse(jf, where + ("trial",), body, ctx, inherited=inherited)
    if trial_timeout is not None:
        trial.timeout_s = int(trial_timeout)
    return trial


def _search_refs(trial: command_job.CommandJob) -> List[str]:

    return [r.split(".", 1)[1] for r in expressions.references(trial.command) if r.startswith("search_space.")]


def _space(jf: JobFile, where: tuple, node: Any) -> Dict[str, Dict[str, Any]]:
    space = check_fields(jf, where, node, list(node or {}))
    if not space:
        raise jf.error(where, "a sweep needs at least one parameter")
    out: Dict[str, Dict[str, Any]] = {}
    for name, spec in space.items():
        at = where + (name,)
        if not str(name).isidentifier():
            raise jf.error(at, "a parameter name takes letters, digits and _")
        spec = check_fields(jf, at, spec, ("type",) + tuple(k for v in SEARCH_TYPES.values() for k in v))
        kind = one_of(jf, at + ("type",), spec.get("type"), tuple(SEARCH_TYPES))
        check_fields(jf, at, spec, ("type",) + SEARCH_TYPES[kind])
        for key in SEARCH_TYPES[kind]:
            if key not in spec:
                raise jf.error(at + (key,), f"{kind} needs {key}")
        if kind == "choice":
            values = spec["values"]
            if not isinstance(values, list) or not values:
                raise jf.error(at + ("values",), "choice needs a non-empty list of values")
        else:
            for key in SEARCH_TYPES[kind]:
                number(jf, at + (key,), spec[key], integer=key == "upper")
        if kind == "randint" and spec["upper"] < 1:
            raise jf.error(at + ("upper",), f"{spec['upper']} is invalid; randint draws 0 ... upper-1, so upper >= 1")
        if "min_value" in spec and not spec["min_value"] < spec["max_value"]:
            raise jf.error(at + ("max_value",), "max_value must be above min_value")
        if "q" in spec and spec["q"] <= 0:
            raise jf.error(at + ("q",), "q must be above 0")
        if "sigma" in spec and spec["sigma"] <= 0:
            raise jf.error(at + ("sigma",), "sigma must be above 0")
        out[str(name)] = {"type": kind, **{k: spec[k] for k in SEARCH_TYPES[kind]}}
    return out


def _sampling(jf: JobFile, where: tuple, node: Any):
    if isinstance(node, str):
        return one_of(jf, where, node, SAMPLINGS), None
    spec = check_fields(jf, where, node, ("type", "seed", "rule", "logbase"))
    kind = one_of(jf, where + ("type",), spec.get("type"), SAMPLINGS)
    check_fields(jf, where, spec, SAMPLING_KEYS[kind])
    seed = number(jf, where + ("seed",), spec["seed"], True) if spec.get("seed") is not None else None
    rule = one_of(jf, where + ("rule",), spec.get("rule", "random"), RANDOM_RULES) if kind == "random" else None
    if spec.get("logbase") not in (None, "e", math.e):
        raise jf.error(where + ("logbase",), "only the natural log base (e) is supported")
    return ("sobol" if rule == "sobol" else kind), seed


def _policy(jf: JobFile, where: tuple, node: Any) -> Dict[str, Any]:
    if node is None:
        return {}
    spec = check_fields(jf, where, node, tuple({k for v in POLICY_KEYS.values() for k in v}))
    kind = one_of(jf, where + ("type",), spec.get("type"), tuple(POLICY_KEYS))
    check_fields(jf, where, spec, POLICY_KEYS[kind])
    out: Dict[str, Any] = {"policy": kind}
    for key, value in spec.items():
        if key == "type" or value is None:
            continue
        out[key] = number(jf, where + (key,), value, key in ("evaluation_interval", "delay_evaluation",
                                                             "truncation_percentage"), 0)
    if kind == "bandit" and ("slack_factor" in out) == ("slack_amount" in out):
        raise jf.error(where, "bandit takes exactly one of slack_factor and slack_amount")
    if kind == "truncation_selection" and "truncation_percentage" not in out:
        raise jf.error(where + ("truncation_percentage",), "truncation_selection needs truncation_percentage (1-99)")
    return out


# ------------------------------------------------------------------------------------ mapping


def grammar(spec: Dict[str, Any]) -> str:
    """A search-space parameter in the sweep engine's grammar, with Azure's meaning."""

    kind = spec["type"]
    if kind == "choice":
        return "choice(" + ",".join(override_for("k", v).split("=", 1)[1] for v in spec["values"]) + ")"
    if kind == "randint":  # Azure: 0 ... upper-1
        return f"range(0,{int(spec['upper'])})"
    if kind == "uniform":
        return f"interval({float(spec['min_value'])},{float(spec['max_value'])})"
    if kind == "loguniform":  # Azure: exp(uniform(min, max)): the bounds are natural-log exponents
        return f"tag(log,interval({math.exp(spec['min_value'])!r},{math.exp(spec['max_value'])!r}))"
    args = [spec[k] for k in SEARCH_TYPES[kind]]
    return f"{kind}({', '.join(repr(a) for a in args)})"


def sweep_values(job: SweepJob) -> Dict[str, Any]:
    """The `sweep` node for mltrain's HyperDrive engine."""
    total = job.max_total_trials
    if total is None and job.sampling != "grid":
        total = DEFAULT_TOTAL_TRIALS
    values: Dict[str, Any] = {
        "sampling": job.sampling,
        "primary_metric": job.primary_metric,
        "goal": job.goal,
        "params": {PARAM_PREFIX + name: grammar(spec) for name, spec in job.space.items()},
    }
    if job.seed is not None:
        values["seed"] = job.seed
    if total is not None:
        values["max_total_runs"] = int(total)
    if job.max_concurrent_trials is not None:
        values["max_concurrent_runs"] = int(job.max_concurrent_trials)
    if job.timeout_s is not None:
        values["max_duration_minutes"] = float(job.timeout_s) / 60.0
    if job.policy:
        values["early_termination"] = dict(job.policy)
    return values


def first_values(job: SweepJob) -> Dict[str, Any]:
    """A placeholder per parameter, so that `job.params.X` exists before a member sets it."""
    return {name: (spec["values"][0] if spec["type"] == "choice" else 0) for name, spec in job.space.items()}
