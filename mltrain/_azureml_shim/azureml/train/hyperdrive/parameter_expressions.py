"""Azure's parameter expressions; each returns Azure's own shape, [kind, [arguments]]."""
from __future__ import annotations

from typing import Any, List


def choice(*options: Any) -> List[Any]:
    values = list(options[0]) if len(options) == 1 and isinstance(options[0], (list, tuple, range)) else list(options)
    return ["choice", [values]]


def randint(upper: int) -> List[Any]:
    return ["randint", [upper]]


def uniform(min_value: float, max_value: float) -> List[Any]:
    return ["uniform", [min_value, max_value]]


def quniform(min_value: float, max_value: float, q: float) -> List[Any]:
    return ["quniform", [min_value, max_value, q]]


def loguniform(min_value: float, max_value: float) -> List[Any]:
    return ["loguniform", [min_value, max_value]]


def qloguniform(min_value: float, max_value: float, q: float) -> List[Any]:
    return ["qloguniform", [min_value, max_value, q]]


def normal(mu: float, sigma: float) -> List[Any]:
    return ["normal", [mu, sigma]]


def qnormal(mu: float, sigma: float, q: float) -> List[Any]:
    return ["qnormal", [mu, sigma, q]]


def lognormal(mu: float, sigma: float) -> List[Any]:
    return ["lognormal", [mu, sigma]]


def qlognormal(mu: float, sigma: float, q: float) -> List[Any]:
    return ["qlognormal", [mu, sigma, q]]
