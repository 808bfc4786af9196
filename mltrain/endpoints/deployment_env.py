"""The environment a deployment's server runs in: mltrain's own interpreter, the environment the deployment
names (built as a run's is), or an MLflow model's own conda.yaml; never with the packages Azure's inference
server brings itself."""
from __future__ import annotations

import copy
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from mltrain.endpoints import inference_server, models_dir

if TYPE_CHECKING:
    from mltrain.endpoints.serving import DeploymentSpec
    from mltrain.environments.spec import EnvironmentSpec

Log = Callable[[str], None]


def interpreter_for(spec: DeploymentSpec, log: Log, stop: Optional[threading.Event] = None) -> Tuple[str, Dict[str, Any]]:
    """(the server's interpreter, the environment as the deployment's record keeps it)."""
    given = spec.environment if spec.environment is not None else _mlflow_environment(spec, log)
    if given is None:
        return sys.executable, {"name": "current"}
    # kept off `endpoints create` and a deployment in mltrain's own environment (about 30 ms of imports)
    from mltrain.environments.materialize import materialize  # startup

    environment = _without_server_packages(given, spec.name, log)
    info = materialize(environment, containerized=False, check_mode="warn", log=log, stop=stop)
    return str(info["interpreter"]), environment.to_json()


def _mlflow_environment(spec: DeploymentSpec, log: Log) -> Optional[EnvironmentSpec]:
    """An MLflow model deployed without a scoring script or an environment runs in the environment it was saved
    with (its conda.yaml), as Azure's no-code deployment builds it: a lightgbm model needs lightgbm."""
    if spec.scoring_script is not None:
        return None
    for model in spec.models:
        if models_dir.is_mlflow(model):
            conda = next(iter(sorted(Path(str(model.source)).rglob("conda.yaml"))), None)
            if conda is not None:
                # as materialize: an MLflow model's own environment only
                from mltrain.environments.spec import from_config  # startup

                log(f"note: deployment {spec.name}: no environment given: model {model.name}:{model.version}'s own "
                    "conda.yaml is built, as Azure builds an MLflow model's")
                return from_config({"name": f"mlflow-{model.name}-{model.version}", "conda": str(conda),
                                    "python": {"user_managed": False}})
    return None


def _without_server_packages(spec: EnvironmentSpec, deployment: str, log: Log) -> EnvironmentSpec:
    """The spec less the pip packages Azure's inference server brings (inference-schema, ...): the server's
    layer comes first on its path, so the environment's pin of one would never be imported, and a pin PyPI no
    longer has (Azure's model-1 example pins inference-schema 1.5.1) would fail the build for nothing."""
    # as materialize: only a deployment with an environment of its own reads requirements
    from packaging.requirements import InvalidRequirement, Requirement  # startup
    from packaging.utils import canonicalize_name  # startup

    def name(line: str) -> Optional[str]:
        try:
            return str(canonicalize_name(Requirement(line).name))
        except InvalidRequirement:
            return None

    layer = {name(p): p for p in inference_server.PACKAGES}
    dropped: List[str] = []

    def kept(lines: List[Any]) -> List[Any]:
        dropped.extend(str(p) for p in lines if name(str(p)) in layer)
        return [p for p in lines if name(str(p)) not in layer]

    spec = copy.deepcopy(spec)
    for dep in (spec.conda or {}).get("dependencies") or []:
        if isinstance(dep, dict) and isinstance(dep.get("pip"), list):
            dep["pip"] = kept(dep["pip"])
    spec.pip = kept(spec.pip)
    if dropped:
        log(f"note: deployment {deployment}: not installing the environment's {', '.join(dropped)}: Azure's "
            f"inference server brings {', '.join(layer[name(p)] for p in dropped)}, first on the server's path")
    return spec
