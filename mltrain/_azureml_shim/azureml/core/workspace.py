"""`Workspace`: on mltrain, a workspace is a folder.

`Workspace.from_config()` finds Azure's `config.json` as Azure does (the folder given or the current one,
then each parent; in each, `config.json`, `.azureml/config.json` and `aml_config/config.json`). The
folder holding it is the workspace: its `.mltrain/` (the same folder `mltrain` and v2 job files read:
`compute/NAME.yaml`, `environment/NAME.yaml`, `datastores.yaml`) holds its compute targets and
registered environments; runs, models and datastores live in mltrain's home (`MLTRAIN_HOME`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional

from azureml.exceptions import UserErrorException

CONFIG_NAMES = ("config.json", os.path.join(".azureml", "config.json"), os.path.join("aml_config", "config.json"))


class Workspace:
    DEFAULT_CPU_CLUSTER_NAME = "cpu-cluster"
    DEFAULT_GPU_CLUSTER_NAME = "gpu-cluster"

    def __init__(self, subscription_id: Optional[str] = None, resource_group: Optional[str] = None,
                 workspace_name: Optional[str] = None, auth: Any = None, _location: Optional[str] = None,
                 _disable_service_check: bool = False, _workspace_id: Optional[str] = None, sku: str = "basic",
                 tags: Optional[Dict[str, str]] = None, _cloud: str = "AzureCloud", path: Optional[str] = None,
                 **kwargs: Any) -> None:
        self.subscription_id = subscription_id or ""
        self.resource_group = resource_group or ""
        self._name = workspace_name or "mltrain"
        self._location = _location or "local"
        self.sku = sku
        self.tags = dict(tags or {})
        #: the workspace folder: where config.json is, or the current folder
        self.path = Path(path or os.getcwd()).resolve()

    # ------------------------------------------------------------------ finding it
    @classmethod
    def from_config(cls, path: Optional[str] = None, auth: Any = None, _logger: Any = None,
                    _file_name: Optional[str] = None) -> Workspace:
        start = Path(path or os.getcwd()).expanduser().resolve()
        if start.is_file():
            return cls._from_file(start)
        names = (_file_name,) if _file_name else CONFIG_NAMES
        for folder in (start, *start.parents):
            for name in names:
                candidate = folder / name
                if candidate.is_file():
                    return cls._from_file(candidate)
        raise UserErrorException(f"We could not find config.json in: {start} or in its parent directories. Please "
                                 "provide the full path to the config file or ensure that config.json exists in the "
                                 "parent directories.")

    @classmethod
    def _from_file(cls, file: Path) -> Workspace:
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UserErrorException(f"{file} is not a workspace config file (JSON with subscription_id, "
                                     f"resource_group, workspace_name): {exc}") from None
        if not isinstance(data, dict):
            raise UserErrorException(f"{file} is not a workspace config file: expected a JSON object")
        folder = file.parent
        if folder.name in (".azureml", "aml_config"):
            folder = folder.parent
        return cls(data.get("subscription_id"), data.get("resource_group"),
                   data.get("workspace_name") or data.get("name"), path=str(folder))

    @classmethod
    def get(cls, name: str, auth: Any = None, subscription_id: Optional[str] = None,
            resource_group: Optional[str] = None, location: Optional[str] = None, cloud: str = "AzureCloud",
            id: Optional[str] = None) -> Workspace:
        return cls(subscription_id, resource_group, name, _location=location)

    @classmethod
    def create(cls, name: str, auth: Any = None, subscription_id: Optional[str] = None,
               resource_group: Optional[str] = None, location: Optional[str] = None, create_resource_group: bool = True,
               exist_ok: bool = False, show_output: bool = True, **kwargs: Any) -> Workspace:
        """A workspace here needs nothing created: the current folder is it (write_config() saves it)."""
        return cls(subscription_id, resource_group, name, _location=location)

    def write_config(self, path: Optional[str] = None, file_name: Optional[str] = None) -> None:
        folder = Path(path or self.path) / ".azureml"
        folder.mkdir(parents=True, exist_ok=True)
        data = {"subscription_id": self.subscription_id, "resource_group": self.resource_group,
                "workspace_name": self.name}
        (folder / (file_name or "config.json")).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")

    # ------------------------------------------------------------------ what it holds
    @property
    def name(self) -> str:
        return self._name

    @property
    def location(self) -> str:
        return self._location

    @property
    def config_dir(self) -> Path:
        """The workspace's `.mltrain/` folder (compute targets, environments, datastores)."""
        return self.path / ".mltrain"

    def config_dirs(self) -> tuple:
        return (str(self.config_dir),) if self.config_dir.is_dir() else ()

    @property
    def compute_targets(self) -> Dict[str, Any]:
        from azureml.core.compute import ComputeTarget

        return {t.name: t for t in ComputeTarget.list(self)}

    @property
    def environments(self) -> Dict[str, Any]:
        from azureml.core.environment import Environment

        return Environment.list(self)

    @property
    def experiments(self) -> Dict[str, Any]:
        from azureml.core.experiment import Experiment

        return {e.name: e for e in Experiment.list(self)}

    @property
    def datastores(self) -> Dict[str, Any]:
        from azureml.core.datastore import Datastore

        return {d.name: d for d in Datastore.list(self)}

    def get_default_datastore(self) -> Any:
        from azureml.core.datastore import Datastore

        return Datastore(self, Datastore.DEFAULT)

    def set_default_datastore(self, name: str) -> None:
        from azureml.core.datastore import Datastore

        if name == Datastore.DEFAULT:
            return
        from azureml.core._bridge import unsupported

        unsupported("Workspace.set_default_datastore", "the default datastore is workspaceblobstore; map other "
                                                       "datastores in .mltrain/datastores.yaml")

    @property
    def models(self) -> Dict[str, Any]:
        from azureml.core.model import Model

        latest: Dict[str, Any] = {}
        for model in Model.list(self, latest=True):
            latest[model.name] = model
        return latest

    def get_details(self) -> Dict[str, Any]:
        return {"name": self.name, "location": self.location, "subscriptionId": self.subscription_id,
                "resourceGroup": self.resource_group, "path": str(self.path)}

    def __repr__(self) -> str:
        return (f"Workspace.create(name='{self.name}', subscription_id='{self.subscription_id}', "
                f"resource_group='{self.resource_group}')")
