"""Azure ML HyperDrive's rules as mltrain applies them, worked by hand: which members each early-
termination policy cancels, how the search space is read, and which settings are refused."""
from __future__ import annotations

import math

import pytest

from mltrain.base.errors import ConfigError
from mltrain.jobspec.schema import EarlyTerminationConf, SweepConf
from mltrain.sweeps import policies, settings, space
from mltrain.sweeps.policies import Curve


def cut(policy: EarlyTerminationConf, curves: dict, interval: int, goal: str = "maximize") -> dict:
    return policies.decide(policy, goal, "score", curves, interval)


def test_bandit_slack_factor_maximize():
    policy = EarlyTerminationConf(policy="bandit", slack_factor=0.25)
    curves = {0: Curve([1.0, 2.0], True), 1: Curve([0.5, 1.7], True), 2: Curve([0.5, 1.5], True)}
    # best_all at interval 2 is 2.0: 1.7 * 1.25 = 2.125 stays, 1.5 * 1.25 = 1.875 < 2.0 is cut
    assert list(cut(policy, curves, 2)) == [2]
    # at interval 1 the best is 1.0: 0.5 * 1.25 < 1.0 cuts both followers
    assert sorted(cut(policy, curves, 1)) == [1, 2]


def test_bandit_slack_amount_minimize_uses_best_so_far():
    policy = EarlyTerminationConf(policy="bandit", slack_amount=0.3)
    curves = {0: Curve([1.0, 0.5], True), 1: Curve([0.7, 0.9], True), 2: Curve([0.9, 0.85], True)}
    # minimize: best_all = 0.5; member 1's best so far is 0.7 (<= 0.8) and stays, member 2's 0.85 > 0.8 is cut
    reasons = cut(policy, curves, 2, goal="minimize")
    assert list(reasons) == [2]
    assert "bandit at interval 2" in reasons[2] and "slack_amount 0.3" in reasons[2] and "(#0" in reasons[2]


def test_bandit_compares_with_finished_members_but_cancels_only_running_ones():
    policy = EarlyTerminationConf(policy="bandit", slack_factor=0.1)
    curves = {0: Curve([5.0, 6.0, 7.0], False, finished=True), 1: Curve([1.0], True), 2: Curve([0.1], False)}
    assert list(cut(policy, curves, 1)) == [1]


def test_median_stopping_uses_running_averages_of_all_members():
    policy = EarlyTerminationConf(policy="median_stopping")
    curves = {0: Curve([1.0, 2.0], True), 1: Curve([0.9, 1.9], True), 2: Curve([0.5, 1.0], True), 3: Curve([0.1, 0.1], True)}
    # averages up to 2: 1.5, 1.4, 0.75, 0.1 -> median 1.075; best so far 2.0, 1.9 stay; 1.0 and 0.1 are cut
    reasons = cut(policy, curves, 2)
    assert sorted(reasons) == [2, 3]
    assert "median 1.075" in reasons[2]


def test_median_stopping_alone_never_cuts():
    policy = EarlyTerminationConf(policy="median_stopping")
    assert cut(policy, {0: Curve([0.1, 0.0, -5.0], True)}, 3) == {}


def test_truncation_cuts_the_floor_of_the_percentage_at_the_same_interval():
    policy = EarlyTerminationConf(policy="truncation_selection", truncation_percentage=50)
    curves = {0: Curve([1.0, 2.0], True), 1: Curve([0.9, 1.9], True), 2: Curve([0.5, 1.0], True), 3: Curve([0.1, 0.1], True)}
    assert sorted(cut(policy, curves, 1)) == [2, 3]
    policy.truncation_percentage = 30  # floor(4 * 0.3) = 1
    assert list(cut(policy, curves, 2)) == [3]
    # values at interval 2 (not the best so far) decide: member 0 fell from 3.0 to 0.0
    curves = {0: Curve([3.0, 0.0], True), 1: Curve([1.0, 1.0], True), 2: Curve([0.9, 0.9], True)}
    policy.truncation_percentage = 34  # floor(3 * 0.34) = 1
    assert list(cut(policy, curves, 2)) == [0]


def test_truncation_exclude_finished_runs():
    finished = Curve([0.0, 0.0], False, finished=True)
    curves = {0: finished, 1: Curve([1.0, 1.0], True), 2: Curve([2.0, 2.0], True)}
    keep = EarlyTerminationConf(policy="truncation_selection", truncation_percentage=50, exclude_finished_runs=False)
    drop = EarlyTerminationConf(policy="truncation_selection", truncation_percentage=50, exclude_finished_runs=True)
    assert cut(keep, curves, 2) == {}       # 3 members, 1 cut: the finished one, which cannot be cancelled
    assert list(cut(drop, curves, 2)) == [1]  # 2 running members, 1 cut


def test_a_member_that_has_not_reached_the_interval_is_left_out():
    policy = EarlyTerminationConf(policy="bandit", slack_factor=0.1)
    assert cut(policy, {0: Curve([1.0], True), 1: Curve([5.0, 9.0], True)}, 2) == {}


def test_nan_counts_as_the_worst_value():
    policy = EarlyTerminationConf(policy="bandit", slack_factor=0.5)
    assert list(cut(policy, {0: Curve([0.5], True), 1: Curve([-math.inf], True)}, 1)) == [1]


@pytest.mark.parametrize("delay,interval_every,expected", [
    (0, 1, [1, 2, 3, 4, 5, 6]),
    (5, 1, [5, 6]),
    (0, 2, [2, 4, 6]),
    (3, 2, [4, 6]),
])
def test_evaluation_intervals(delay, interval_every, expected):
    policy = EarlyTerminationConf(policy="bandit", slack_factor=0.1, delay_evaluation=delay, evaluation_interval=interval_every)
    assert [i for i in range(1, 7) if policies.is_evaluation(policy, i)] == expected


def test_search_space_in_hydras_grammar():
    parsed = space.parse(["job=script", "a=1,2", "b=tag(log, interval(1e-4, 1))", "c=range(0, 1, 0.25)",
                          "+d=choice(x, 'y z')", "e=interval(0, 2)", "f=tag(int, interval(1, 8))"], {"g": "choice(3,4)"})
    kinds = {d.key: d.kind for d in parsed.dimensions}
    assert kinds == {"a": "choice", "b": "loginterval", "c": "range", "+d": "choice", "e": "interval", "f": "intinterval", "g": "choice"}
    assert parsed.fixed == ["job=script"]
    assert next(d for d in parsed.dimensions if d.key == "c").values == [0, 0.25, 0.5, 0.75]
    assert space.parse(["a=1,2,3", "c=range(0, 1, 0.25)"], {"g": "choice(x,y)"}).grid_size() == 3 * 4 * 2
    dist = next(d for d in parsed.dimensions if d.key == "b").distribution()
    assert dist.log and dist.low == 1e-4
    assert space.override_for("+d", "y z") == "+d=y\\ z"


@pytest.mark.parametrize("sampling,override,refused", [
    ("grid", "a=interval(0,1)", True),
    ("grid", "a=range(1,4)", False),
    ("bayesian", "a=tag(log, interval(1e-3, 1))", True),
    ("bayesian", "a=interval(0, 1)", False),
    ("random", "a=tag(log, interval(1e-3, 1))", False),
])
def test_azure_sampling_rules(sampling, override, refused):
    parsed = space.parse([override], {})
    if refused:
        with pytest.raises(ConfigError, match=f"cannot be sampled by sweep.sampling={sampling}"):
            space.check_sampling(parsed, sampling)
    else:
        space.check_sampling(parsed, sampling)


def et(**kw) -> EarlyTerminationConf:
    return EarlyTerminationConf(**kw)


@pytest.mark.parametrize("sweep,message", [
    (SweepConf(sampling="hyperband"), "sweep.sampling: 'hyperband' is not supported (allowed: grid, random, sobol, bayesian)"),
    (SweepConf(goal="max"), "sweep.goal: 'max' is not supported (allowed: maximize, minimize)"),
    (SweepConf(sampling="random"), "sweep.max_total_runs: sweep.sampling=random needs a number of runs"),
    (SweepConf(early_termination=et(policy="bandit", slack_factor=0.1)), "sweep.primary_metric: early termination (bandit) needs a primary metric"),
    (SweepConf(sampling="bayesian", max_total_runs=4, primary_metric="m", early_termination=et(policy="median_stopping")),
     "bayesian sampling takes no early termination"),
    (SweepConf(sampling="bayesian", max_total_runs=4), "sweep.primary_metric: bayesian sampling needs a primary metric"),
    (SweepConf(primary_metric="m", early_termination=et(policy="bandit")), "bandit takes exactly one of slack_factor and slack_amount, got neither"),
    (SweepConf(primary_metric="m", early_termination=et(policy="bandit", slack_factor=0.1, slack_amount=1.0)), "got slack_factor and slack_amount"),
    (SweepConf(primary_metric="m", early_termination=et(policy="truncation_selection", truncation_percentage=100)),
     "sweep.early_termination.truncation_percentage: 100 is invalid; must be an integer from 1 to 99"),
    (SweepConf(primary_metric="m", early_termination=et(policy="median_stopping", slack_factor=0.2)),
     "sweep.early_termination.slack_factor: is not read by policy median_stopping (it belongs to bandit)"),
    (SweepConf(primary_metric="m", early_termination=et(policy="bandit", slack_amount=0.2, evaluation_interval=0)),
     "sweep.early_termination.evaluation_interval: 0 is invalid; must be >= 1"),
    (SweepConf(max_concurrent_runs=0), "sweep.max_concurrent_runs: 0 is invalid; must be >= 1"),
    (SweepConf(early_termination=et(policy="asha")), "sweep.early_termination.policy: 'asha' is not supported"),
])
def test_refused_settings_say_one_line(sweep, message):
    with pytest.raises(ConfigError) as info:
        settings.check(sweep)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_defaults_are_hydras_plain_grid_and_any_key_makes_a_hyperdrive_sweep():
    assert not settings.is_hyperdrive(SweepConf())
    assert settings.is_hyperdrive(SweepConf(primary_metric="top1_accuracy"))
    assert settings.is_hyperdrive(SweepConf(early_termination=et(policy="bandit")))
    assert settings.check(SweepConf(primary_metric="m")).sampling == "grid"
