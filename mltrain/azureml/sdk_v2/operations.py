"""The workspace-level operations of mltrain's MLClient besides jobs and assets: `compute` (Azure compute
names as `.mltrain/compute/NAME.yaml`), `workspaces` (this folder as the workspace) and the refusal of
Azure's registries (`MLClient(..., registry_name=...)`), each call on them one line naming it.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from mltrain.azureml.sdk_v2 import azure_ai_ml_internals
from mltrain.base.home import mltrain_home
from mltrain.config.paths import builtin_conf_dir, shipped_options


def _azure() -> Any:
    from mltrain.azureml.sdk_v2 import require_azure  # optional

    return require_azure()


class Done:
    """An LRO poller of an operation that has already happened (begin_cancel, begin_create_or_update)."""

    def __init__(self, value: Any = None) -> None:
        self._value = value

    def result(self, timeout: Optional[float] = None) -> Any:
        return self._value

    def wait(self, timeout: Optional[float] = None) -> None:
        return None

    def done(self) -> bool:
        return True

    def status(self) -> str:
        return "Succeeded"


class WorkspaceOperations:
    """`ml_client.workspaces.get(NAME)` (and the private `_workspaces` some notebooks call): the workspace the
    client names, its Azure resource id made from the client's subscription and resource group (notebooks
    split it to read them back)."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def get(self, name: Optional[str] = None, **kwargs: Any) -> Any:
        client = self._client
        name = name or client.workspace_name or "mltrain"
        return azure_ai_ml_internals.workspace(
            name, f"mltrain workspace (home {mltrain_home()})",
            f"/subscriptions/{client.subscription_id or '00000000-0000-0000-0000-000000000000'}"
            f"/resourceGroups/{client.resource_group_name or 'mltrain'}"
            f"/providers/Microsoft.MachineLearningServices/workspaces/{name}")

    def list(self, **kwargs: Any) -> List[Any]:
        return [self.get()]


class Registry:
    """An asset operation of a registry client: every call is refused in one line naming it."""

    def __init__(self, registry: str, kind: str) -> None:
        self._registry = registry
        self._kind = kind

    def __getattr__(self, call: str) -> Any:
        if call.startswith("__"):
            raise AttributeError(call)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
            raise _azure().ValidationException(
                message=f"MLClient(registry_name={self._registry!r}).{self._kind}.{call}({shown}): Azure ML "
                        "registries are Azure's service, not available in mltrain; register the asset in this "
                        f"workspace (ml_client.{self._kind}.create_or_update, .mltrain/)",
                no_personal_data_message="registries are not available in mltrain")
        return refuse


class ComputeOperations:
    """Azure compute names as mltrain's compute options: `.mltrain/compute/NAME.yaml` (this folder's or
    the nearest one above), or the shipped `local` and `slurm`. What `get` returns is azure-ai-ml's AmlCompute
    with the fields notebooks print: `size` names the option's kind and settings, `max_instances` its nodes,
    `provisioning_state` Succeeded (the cluster is the user's own, there to use), `created_on` the file's time."""

    def get(self, name: str) -> Any:
        azure = _azure()
        folder = _compute_folder()
        path = folder / f"{name}.yaml" if folder else None
        if path is not None and path.is_file():
            return _entity(name, path, f"mltrain compute {name} ({path})")
        if name in shipped_options("compute"):
            return _entity(name, builtin_conf_dir() / "compute" / f"{name}.yaml", f"mltrain compute {name}")
        where = folder or Path(".mltrain") / "compute"
        raise azure.ResourceNotFoundError(f"Compute {name} not found: mltrain maps compute names through "
                                          f"{where}/{name}.yaml; add that file (e.g. `defaults: [slurm_schema, _self_]`)")

    def list(self, **kwargs: Any) -> List[Any]:
        folder = _compute_folder()
        names = sorted(p.stem for p in folder.glob("*.yaml")) if folder else []
        return [self.get(n) for n in names]

    def begin_create_or_update(self, compute: Any, **kwargs: Any) -> Done:
        """A cluster is the user's own here: an existing mapping is returned, else the refusal names the file."""
        return Done(self.get(compute.name))


def _entity(name: str, path: Path, description: str) -> Any:
    size, nodes = describe(_read(path))
    created = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return azure_ai_ml_internals.compute(name, description, size, nodes, created)


def _read(path: Path) -> Dict[str, Any]:
    try:
        loaded = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def describe(option: Dict[str, Any]) -> Tuple[str, int]:
    """(size, nodes) of a compute option as its file gives them: its kind (the schema it extends) and the
    settings it makes, e.g. `slurm: partition=gpu, gpus_per_node=4`; a file that sets nothing says so."""
    kinds = [str(d)[:-len("_schema")] for d in option.get("defaults") or [] if str(d).endswith("_schema")]
    kind = str(option.get("kind") or (kinds[0] if kinds else "compute"))
    settings = ", ".join(f"{k}={v}" for k, v in option.items() if k not in ("defaults", "kind")) or "its defaults"
    return f"{kind}: {settings}", int(option.get("nodes") or 1)


def _compute_folder() -> Optional[Path]:
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / ".mltrain" / "compute"
        if candidate.is_dir() and (folder / ".mltrain").resolve() != mltrain_home().resolve():
            return candidate
    return None
