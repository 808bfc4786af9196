"""Azure ML HyperDrive's early-termination policies, as pure functions of the members' metric curves.

Each value a member logs of the primary metric is one interval. A policy is applied at interval i
when i is a multiple of evaluation_interval and i >= delay_evaluation; it compares the members that
have reached interval i (finished ones included, unless truncation_selection's
exclude_finished_runs says otherwise) and cancels the running ones it names. A NaN counts as the
worst value (the controller turns it into -inf or +inf):

- bandit: a member whose best value up to i falls outside the slack of the best value any member
  reached up to i. Maximize: best_self * (1 + slack_factor) < best_all, or best_self < best_all -
  slack_amount; minimize mirrored (best_self > best_all * (1 + slack_factor), best_all + slack_amount).
- median_stopping: a member whose best value up to i is worse than the median of every member's
  running average up to i.
- truncation_selection: the lowest truncation_percentage % of the members by their value at
  interval i (floor(n * X / 100) members).

Optuna has pruners, but no bandit, and its median pruner compares with completed trials only; these
rules are Azure's, so they are mltrain's own.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Dict, List

from mltrain.jobspec.schema import EarlyTerminationConf


@dataclass
class Curve:
    values: List[float]     # the primary metric, one value per interval, in the order logged
    running: bool           # this evaluation may cancel it (running, and not yet judged at this interval)
    finished: bool = False  # ended (Completed, Failed or Canceled): left out by exclude_finished_runs


def is_evaluation(policy: EarlyTerminationConf, interval: int) -> bool:
    return (policy.policy != "none" and interval >= max(1, policy.delay_evaluation)
            and interval % policy.evaluation_interval == 0)


def best_of(values: List[float], goal: str) -> float:
    return max(values) if goal == "maximize" else min(values)


def worse(a: float, b: float, goal: str) -> bool:
    """Whether a is worse than b."""
    return a < b if goal == "maximize" else a > b


def decide(policy: EarlyTerminationConf, goal: str, metric: str, curves: Dict[int, Curve], interval: int) -> Dict[int, str]:
    """The running members to cancel at an evaluation at `interval`, each with the reason."""
    reached = {m: c for m, c in curves.items() if len(c.values) >= interval}
    if not reached:
        return {}
    if policy.policy == "bandit":
        return _bandit(policy, goal, metric, reached, interval)
    if policy.policy == "median_stopping":
        return _median(goal, metric, reached, interval)
    if policy.policy == "truncation_selection":
        return _truncation(policy, goal, metric, reached, interval)
    return {}


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def _bandit(policy, goal, metric, reached, i) -> Dict[int, str]:
    bests = {m: best_of(c.values[:i], goal) for m, c in reached.items()}
    leader = sorted(bests, key=lambda m: (-bests[m] if goal == "maximize" else bests[m], m))[0]
    best_all = bests[leader]
    if policy.slack_factor is not None:
        f = policy.slack_factor
        edge = best_all / (1 + f) if goal == "maximize" else best_all * (1 + f)
        slack = f"slack_factor {f:g}"
    else:
        a = policy.slack_amount
        edge = best_all - a if goal == "maximize" else best_all + a
        slack = f"slack_amount {a:g}"
    out = {}
    for m, c in reached.items():
        if not c.running:
            continue
        best_self = bests[m]
        if policy.slack_factor is not None:
            outside = best_self * (1 + f) < best_all if goal == "maximize" else best_self > best_all * (1 + f)
        else:
            outside = worse(best_self, edge, goal)
        if outside:
            out[m] = (f"bandit at interval {i}: best {metric} {_fmt(best_self)} is outside {slack} of the best member's "
                      f"{_fmt(best_all)} (#{leader}; limit {_fmt(edge)})")
    return out


def _median(goal, metric, reached, i) -> Dict[int, str]:
    averages = [statistics.fmean(c.values[:i]) for c in reached.values()]
    median = statistics.median(averages)
    out = {}
    for m, c in reached.items():
        best_self = best_of(c.values[:i], goal)
        if c.running and worse(best_self, median, goal):
            out[m] = (f"median_stopping at interval {i}: best {metric} {_fmt(best_self)} is worse than the median "
                      f"{_fmt(median)} of {len(averages)} members' running averages")
    return out


def _truncation(policy, goal, metric, reached, i) -> Dict[int, str]:
    pool = {m: c for m, c in reached.items() if not (c.finished and policy.exclude_finished_runs)}
    cut = math.floor(len(pool) * policy.truncation_percentage / 100)
    if cut == 0:
        return {}
    # worst first; ties go against the later member, so the outcome never depends on dict order
    order = sorted(pool, key=lambda m: (pool[m].values[i - 1] if goal == "maximize" else -pool[m].values[i - 1], -m))
    out = {}
    for m in order[:cut]:
        if pool[m].running:
            out[m] = (f"truncation_selection at interval {i}: {metric} {_fmt(pool[m].values[i - 1])} is in the lowest "
                      f"{policy.truncation_percentage}% of {len(pool)} members ({cut} cut)")
    return out
