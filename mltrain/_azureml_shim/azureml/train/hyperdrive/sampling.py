"""The samplings: grid (choice only), random (Optuna's random or Sobol sampler), Bayesian (choice,
uniform and quniform only; no early termination), with Azure's refusals."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException

#: Azure's names of each expression's arguments (mltrain.azureml.v2_schema.SEARCH_TYPES)
ARGUMENTS = {"choice": ("values",), "randint": ("upper",), "uniform": ("min_value", "max_value"),
             "quniform": ("min_value", "max_value", "q"), "loguniform": ("min_value", "max_value"),
             "qloguniform": ("min_value", "max_value", "q"), "normal": ("mu", "sigma"),
             "qnormal": ("mu", "sigma", "q"), "lognormal": ("mu", "sigma"), "qlognormal": ("mu", "sigma", "q")}


class HyperParameterSampling:
    _name = "HyperParameterSampling"
    _supported: Optional[tuple] = None

    def __init__(self, parameter_space: Dict[str, Any], properties: Optional[Dict[str, Any]] = None) -> None:
        if not isinstance(parameter_space, dict) or not parameter_space:
            raise UserErrorException(f"{self._name}: parameter_space must be a non-empty dict of name: expression")
        self._parameter_space = dict(parameter_space)
        self._properties = dict(properties or {})
        for name, expression in parameter_space.items():
            kind = _kind(name, expression)
            if self._supported is not None and kind not in self._supported:
                raise UserErrorException(f"{self._name}: parameter '{name}' uses {kind}; {self._name} supports "
                                         f"{', '.join(self._supported)} only")

    @property
    def parameter_space(self) -> Dict[str, Any]:
        return dict(self._parameter_space)

    def specs(self) -> Dict[str, Dict[str, Any]]:
        """{name: {type, arguments}} in the v2 search-space shape."""
        out = {}
        for name, expression in self._parameter_space.items():
            kind = _kind(name, expression)
            args = list(expression[1])
            out[name] = {"type": kind, **dict(zip(ARGUMENTS[kind], args))}
        return out

    def sampling(self) -> str:
        raise NotImplementedError

    def seed(self) -> Optional[int]:
        return None


def _kind(name: str, expression: Any) -> str:
    if (not isinstance(expression, list) or len(expression) != 2 or expression[0] not in ARGUMENTS
            or not isinstance(expression[1], list) or len(expression[1]) != len(ARGUMENTS[expression[0]])):
        raise UserErrorException(f"parameter '{name}': {expression!r} is not a parameter expression (use choice, "
                                 "randint, uniform, quniform, loguniform, qloguniform, normal, qnormal, lognormal or "
                                 "qlognormal from azureml.train.hyperdrive)")
    return str(expression[0])


class RandomParameterSampling(HyperParameterSampling):
    _name = "RandomParameterSampling"

    def __init__(self, parameter_space: Dict[str, Any], properties: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(parameter_space, properties)
        rule = str(self._properties.get("rule", "random")).lower()
        if rule not in ("random", "sobol"):
            raise UserErrorException(f"RandomParameterSampling: rule '{rule}' is not supported (allowed: random, sobol)")

    def sampling(self) -> str:
        return "sobol" if str(self._properties.get("rule", "random")).lower() == "sobol" else "random"

    def seed(self) -> Optional[int]:
        seed = self._properties.get("seed")
        return int(seed) if seed is not None else None


class GridParameterSampling(HyperParameterSampling):
    _name = "GridParameterSampling"
    _supported = ("choice",)

    def sampling(self) -> str:
        return "grid"


class BayesianParameterSampling(HyperParameterSampling):
    _name = "BayesianParameterSampling"
    _supported = ("choice", "uniform", "quniform")

    def sampling(self) -> str:
        return "bayesian"


def describe(space: Dict[str, Any]) -> List[str]:
    return [f"{k}: {v[0]}{tuple(v[1])}" for k, v in space.items()]
