"""Azure ML's built-in (Designer) components, named in a v2 pipeline by `azureml:NAME@latest` or
`azureml://registries/azureml/components/NAME/...`, resolved through mltrain's table of them
(mltrain.components.builtin: each name's job kind, ports and parameters) into one pipeline step."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from mltrain.base.errors import ConfigError
from mltrain.components.builtin import COMPONENTS, BuiltinComponent, overrides


def lookup(name: str) -> Optional[BuiltinComponent]:
    """A built-in component by its Azure name (Designer names use _ or -, any case)."""
    return COMPONENTS.get(name.lower().replace("-", "_"))


def folders(component: BuiltinComponent) -> Dict[str, str]:
    """Output port -> the folder of the step's run it lands in (the pipeline engine's output name)."""
    return {p.name: p.folder or p.name for p in component.outputs}


def step_overrides(component: BuiltinComponent, inputs: List[str], parameters: Mapping[str, Any]
                   ) -> Tuple[List[str], Optional[str]]:
    """The step's overrides: each input port's path as `${inputs.PORT}`, each output port's folder as
    `${outputs.FOLDER}`; else (None, the table's one-line refusal)."""
    try:
        return overrides(component, {name: f"${{inputs.{name}}}" for name in inputs},
                         {port: f"${{outputs.{folder}}}" for port, folder in folders(component).items()},
                         parameters), None
    except ConfigError as exc:
        return [], f"{exc.key.split('.', 1)[-1]}: {exc.problem}" + (
            f" (allowed: {', '.join(map(str, exc.allowed))})" if exc.allowed else "")
