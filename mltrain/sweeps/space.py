"""The search space of a sweep, written in Hydra's own sweep grammar (as Hydra's Optuna sweeper reads
it) and turned into Optuna distributions.

    choice(a, b, c)  or  a,b,c        a categorical choice (Azure: choice)
    range(start, stop[, step])        evenly spaced values, stop excluded (Azure: quniform / randint)
    interval(low, high)               uniform between low and high (Azure: uniform)
    tag(log, interval(low, high))     log-uniform (Azure: loguniform)
    tag(int, interval(low, high))     integers between low and high, both included

and, in `sweep.params` only, Azure ML's parameter expressions that Hydra's grammar cannot say, with
Azure's meaning (reference-yaml-job-sweep, "Parameter expressions"):

    quniform(min, max, q)             round(uniform(min, max) / q) * q
    qloguniform(min, max, q)          round(exp(uniform(min, max)) / q) * q   (min, max: natural-log exponents)
    normal(mu, sigma)                 a normal draw;  qnormal(mu, sigma, q): round(normal / q) * q
    lognormal(mu, sigma)              exp(normal(mu, sigma));  qlognormal(mu, sigma, q): round(exp(normal) / q) * q

Optuna samples each of these as a uniform variable (u in (0, 1), or uniform(min, max)) and the member
gets the transformed value, so random and sobol draws have Azure's distribution exactly.

Parsing needs only Hydra; the Optuna distributions are built when the sweep starts.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Dict, List, Tuple

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
from hydra.errors import HydraException

from mltrain.base.errors import ConfigError
from mltrain.config.hydra_internals import value_as_override_text

#: What each sampling method accepts (Azure ML: grid only discrete; bayesian choice/uniform/quniform).
ALLOWED = {
    "grid": ("choice", "range"),
    "random": ("choice", "range", "interval", "loginterval", "intinterval", "quniform", "qloguniform", "normal",
               "qnormal", "lognormal", "qlognormal"),
    "sobol": ("choice", "range", "interval", "loginterval", "intinterval", "quniform", "qloguniform", "normal",
              "qnormal", "lognormal", "qlognormal"),
    "bayesian": ("choice", "range", "interval", "intinterval", "quniform"),
}
SPELLING = {"choice": "choice(...)", "range": "range(...)", "interval": "interval(...)",
            "loginterval": "tag(log, interval(...))", "intinterval": "tag(int, interval(...))",
            "quniform": "quniform(...)", "qloguniform": "qloguniform(...)", "normal": "normal(...)",
            "qnormal": "qnormal(...)", "lognormal": "lognormal(...)", "qlognormal": "qlognormal(...)"}
#: Azure's expressions with no Hydra spelling: name -> how many numbers they take.
AZURE_EXPRESSIONS = {"quniform": 3, "qloguniform": 3, "normal": 2, "qnormal": 3, "lognormal": 2, "qlognormal": 3}
AZURE_CALL = re.compile(r"^\s*(" + "|".join(AZURE_EXPRESSIONS) + r")\s*\((.*)\)\s*$")
#: The unit variable behind a normal draw stays off 0 and 1, whose inverse CDF is infinite.
UNIT_EPS = 1e-9


@dataclass
class Dimension:
    key: str            # the override's key as written, `+` included (`+trainer.foo`)
    kind: str           # choice | range | interval | loginterval | intinterval
    text: str           # the value as written, for sweep.json and the console
    values: List[Any]   # choice: its values; range: every value; interval: [low, high]

    def distribution(self):
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution  # heavy

        if self.kind == "choice":
            return CategoricalDistribution(self.values)
        if self.kind == "range":
            low, high = self.values[0], self.values[-1]
            step = self.values[1] - self.values[0] if len(self.values) > 1 else 1
            if all(isinstance(v, int) for v in self.values):
                return IntDistribution(low, high, step=step)
            return FloatDistribution(float(low), float(high), step=float(step))
        low, high = self.values
        if self.kind == "intinterval":
            return IntDistribution(int(low), int(high))
        if self.kind in ("quniform", "qloguniform"):
            return FloatDistribution(float(self.values[0]), float(self.values[1]))
        if self.kind in ("normal", "qnormal", "lognormal", "qlognormal"):
            return FloatDistribution(UNIT_EPS, 1.0 - UNIT_EPS)
        return FloatDistribution(float(low), float(high), log=self.kind == "loginterval")

    def value(self, sampled: Any) -> Any:
        """The member's value for what Optuna sampled: itself, or Azure's transform of it."""
        if self.kind not in AZURE_EXPRESSIONS:
            return sampled
        if self.kind in ("quniform", "qloguniform"):
            x = math.exp(sampled) if self.kind == "qloguniform" else sampled
        else:
            mu, sigma = self.values[0], self.values[1]
            x = NormalDist(mu, sigma).inv_cdf(sampled)
            x = math.exp(x) if self.kind in ("lognormal", "qlognormal") else x
        if self.kind.startswith("q"):
            q = self.values[2]
            x = round(x / q) * q
            return int(x) if float(q).is_integer() else round(x, 12)
        return x

    def grid_values(self) -> List[Any]:
        return list(self.values)


@dataclass
class Space:
    dimensions: List[Dimension]
    fixed: List[str]  # the overrides every member gets as they are

    def distributions(self) -> Dict[str, Any]:
        return {d.key: d.distribution() for d in self.dimensions}

    def describe(self) -> Dict[str, str]:
        return {d.key: d.text for d in self.dimensions}

    def grid_size(self) -> int:
        size = 1
        for d in self.dimensions:
            size *= len(d.values)
        return size


def parse(arguments: List[str], params: Dict[str, str]) -> Space:
    """The command line's overrides (sweep ones become dimensions) and sweep.params ({key: grammar})."""
    parser = OverridesParser.create()
    dimensions: Dict[str, Dimension] = {}
    lines = list(arguments)
    for key, value in params.items():
        call = AZURE_CALL.match(str(value))
        if call:
            dimensions[key] = _azure_dimension(key, call.group(1), call.group(2), str(value))
        else:
            lines.append(f"{key}={value}")
    fixed: List[str] = []
    for line in lines:
        try:
            override = parser.parse_override(line)
        except HydraException as exc:
            raise ConfigError("sweep.params", f"cannot read '{line}': {str(exc).splitlines()[0]}") from None
        if not override.is_sweep_override():
            fixed.append(line)
            continue
        key = override.get_key_element()
        if key in dimensions:
            raise ConfigError(key, "is swept twice (on the command line and in sweep.params)")
        dimensions[key] = _dimension(key, override)
    return Space(list(dimensions.values()), fixed)


def _dimension(key: str, override: Any) -> Dimension:
    sweep = override.value()
    text = override.get_value_string()
    tags = set(getattr(sweep, "tags", ()) or ())
    if isinstance(sweep, ChoiceSweep):
        values = list(sweep.list)
        bad = [v for v in values if not isinstance(v, (str, int, float, bool)) and v is not None]
        if bad:
            raise ConfigError(key, f"choice values must be plain values, not {bad[0]!r}")
        return Dimension(key, "choice", text, values)
    if isinstance(sweep, RangeSweep):
        values = _range_values(sweep)
        if not values:
            raise ConfigError(key, f"{text} is empty")
        return Dimension(key, "range", text, values)
    if isinstance(sweep, IntervalSweep):
        low, high = sweep.start, sweep.end
        if not low < high:
            raise ConfigError(key, f"{text}: the low end must be below the high end")
        if "log" in tags:
            if low <= 0:
                raise ConfigError(key, f"{text}: a log interval needs a low end above 0")
            return Dimension(key, "loginterval", text, [low, high])
        if "int" in tags:
            return Dimension(key, "intinterval", text, [int(low), int(high)])
        return Dimension(key, "interval", text, [low, high])
    raise ConfigError(key, f"{text} is not a search space mltrain can sample",
                      ("choice(...)", "a,b,c", "range(...)", "interval(...)", "tag(log, interval(...))"))


def _azure_dimension(key: str, kind: str, args: str, text: str) -> Dimension:
    try:
        numbers = [float(a) for a in args.split(",")]
    except ValueError:
        raise ConfigError(key, f"{text}: {kind} takes {AZURE_EXPRESSIONS[kind]} numbers") from None
    if len(numbers) != AZURE_EXPRESSIONS[kind]:
        raise ConfigError(key, f"{text}: {kind} takes {AZURE_EXPRESSIONS[kind]} numbers")
    if kind in ("quniform", "qloguniform") and not numbers[0] < numbers[1]:
        raise ConfigError(key, f"{text}: min_value must be below max_value")
    if kind not in ("quniform", "qloguniform") and numbers[1] <= 0:
        raise ConfigError(key, f"{text}: sigma must be above 0")
    if kind.startswith("q") and numbers[2] <= 0:
        raise ConfigError(key, f"{text}: q must be above 0")
    return Dimension(key, kind, text, [int(n) if n.is_integer() else n for n in numbers])


def _range_values(sweep: Any) -> List[Any]:
    start, stop, step = sweep.start, sweep.stop, sweep.step
    if step == 0:
        return []
    out, i = [], 0
    while True:
        value = start + i * step
        if (step > 0 and value >= stop) or (step < 0 and value <= stop):
            return out
        # 0.1 * 3 is 0.30000000000000004: keep the digits the user wrote
        out.append(round(value, 12) if isinstance(value, float) else value)
        i += 1


def check_sampling(space: Space, sampling: str) -> None:
    """Azure ML's rule for each sampling method, one line for the first dimension that breaks it."""
    allowed = ALLOWED[sampling]
    for d in space.dimensions:
        if d.kind not in allowed:
            what = "only discrete choices" if sampling == "grid" else "only choice, uniform and quniform"
            raise ConfigError(d.key, f"{d.text} cannot be sampled by sweep.sampling={sampling}, which takes {what}",
                              [SPELLING[k] for k in allowed])


def override_for(key: str, value: Any) -> str:
    """One member's override for a sampled value, quoted as Hydra's grammar needs (Hydra's own quoting)."""
    return f"{key}={value_as_override_text(value)}"


def dimensions_summary(space: Space) -> List[Tuple[str, str]]:
    return [(d.key, d.text) for d in space.dimensions]
