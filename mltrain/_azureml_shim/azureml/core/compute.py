"""Compute targets are mltrain computes: `ComputeTarget(workspace=ws, name=N)` is the option
`compute=N`, the file `.mltrain/compute/N.yaml` of the workspace.

There is no cluster to provision. `ComputeTarget.create(ws, N, AmlCompute.provisioning_configuration(...))`
writes that file, mapping N to this machine, or, when the workspace's `.mltrain/compute/default.yaml`
exists (say, a Slurm cluster), to that; it says so in one line naming the file to edit. A target that
is not there raises Azure's ComputeTargetException, so the seeds' try/except runs as written.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

from azureml.exceptions import ComputeTargetException

from mltrain.jobspec.computes import DEFAULT_COMPUTE, compute_schema


def _compute_dir(workspace: Any) -> Path:
    return workspace.config_dir / "compute"


def _kind(file: Path, seen: int = 0) -> str:
    """local or slurm, from a compute file's own `kind` or its defaults (`slurm_schema`, `local_schema`,
    another option of the group)."""
    import yaml  # submission

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return "unknown"
    if isinstance(data, dict) and data.get("kind"):
        return str(data["kind"])
    for entry in (data.get("defaults") or []) if isinstance(data, dict) else []:
        name = str(entry)
        if name.endswith("_schema"):
            return name[: -len("_schema")]
        if name not in ("_self_",) and (file.parent / f"{name}.yaml").is_file() and seen < 8:
            return _kind(file.parent / f"{name}.yaml", seen + 1)
    return DEFAULT_COMPUTE


def _has_field(kind: str, name: str) -> bool:
    """Whether `compute=kind`'s schema has the key (Azure's max_nodes is a Slurm cluster's, not this machine's)."""
    schema = compute_schema(kind)
    return schema is not None and name in {f.name for f in dataclasses.fields(schema)}


class ComputeTarget:
    """A compute target of the workspace (Azure's AmlCompute); `name` is the `compute=` option it selects."""

    def __new__(cls, workspace: Any = None, name: Optional[str] = None, **kwargs: Any) -> Any:
        if workspace is None or name is None:  # unpickling, or a subclass's own construction
            return super().__new__(cls)
        file = _compute_dir(workspace) / f"{name}.yaml"
        if not file.is_file():
            raise ComputeTargetException(f"ComputeTargetNotFound: Compute Target with name {name} not found in "
                                         f"provided workspace (mltrain: no {file})")
        target = super().__new__(AmlCompute)
        target._init(workspace, name, file)
        return target

    def __init__(self, workspace: Any = None, name: Optional[str] = None, **kwargs: Any) -> None:
        pass  # __new__ did the work

    def _init(self, workspace: Any, name: str, file: Path) -> None:
        self.workspace = workspace
        self.name = name
        self.file = file
        self.type = "AmlCompute"
        self.provisioning_state = "Succeeded"
        self.provisioning_errors = None

    @property
    def kind(self) -> str:
        """mltrain's backend for it: local or slurm."""
        return _kind(self.file)

    @staticmethod
    def create(workspace: Any, name: str, provisioning_configuration: Any) -> Any:
        folder = _compute_dir(workspace)
        folder.mkdir(parents=True, exist_ok=True)
        file = folder / f"{name}.yaml"
        if file.is_file():
            return ComputeTarget(workspace=workspace, name=name)
        config = provisioning_configuration or AmlComputeProvisioningConfiguration()
        default = folder / "default.yaml"
        base = "default" if default.is_file() and name != "default" else "local_schema"
        lines = [f"# Azure ML compute target '{name}' ({config.describe()}), made by ComputeTarget.create.",
                 "# mltrain maps it to " + ("the workspace's default compute (default.yaml)" if base == "default"
                                            else "this machine") + "; edit this file to change that, e.g. for Slurm:",
                 "#   defaults: [slurm_schema, _self_]   then partition: NAME, gpus_per_node: N, ...",
                 f"defaults: [{base}, _self_]"]
        if base == "default" and config.max_nodes and _has_field(_kind(default), "max_nodes"):
            lines.append(f"max_nodes: {int(config.max_nodes)}")
        file.write_text("\n".join(lines) + "\n", encoding="utf-8")
        target = ComputeTarget(workspace=workspace, name=name)
        where = "this machine" if target.kind == DEFAULT_COMPUTE else f"{target.kind} (default.yaml)"
        print(f"mltrain: compute target '{name}' maps to {where}: edit {file} to change it", file=sys.stderr)
        return target

    @staticmethod
    def list(workspace: Any) -> List[Any]:
        folder = _compute_dir(workspace)
        names = sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []
        return [ComputeTarget(workspace=workspace, name=n) for n in names]

    @staticmethod
    def attach(workspace: Any, name: str, attach_configuration: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("ComputeTarget.attach", f"describe the machine or cluster in .mltrain/compute/{name}.yaml "
                                            "(defaults: [slurm_schema, _self_] for a Slurm cluster)")

    def wait_for_completion(self, show_output: bool = False, min_node_count: Optional[int] = None,
                            timeout_in_minutes: int = 20, is_delete_operation: bool = False) -> None:
        if show_output:
            print(f"{self.provisioning_state}\nmltrain: compute '{self.name}' is {self.kind}: nothing to provision")

    def get_status(self) -> Any:
        return _Status(self.provisioning_state)

    def refresh_state(self) -> None:
        pass

    def delete(self) -> None:
        self.file.unlink(missing_ok=True)
        self.provisioning_state = "Deleting"

    def detach(self) -> None:
        self.delete()

    def serialize(self) -> Dict[str, Any]:
        return {"name": self.name, "type": self.type, "kind": self.kind, "file": str(self.file)}

    def __repr__(self) -> str:
        return f"AmlCompute(workspace={self.workspace.name!r}, name={self.name!r}, kind={self.kind!r})"


class _Status:
    def __init__(self, state: str) -> None:
        self.provisioning_state = state
        self.current_node_count = 0
        self.errors = None

    def serialize(self) -> Dict[str, Any]:
        return {"provisioningState": self.provisioning_state}


class AmlComputeProvisioningConfiguration:
    def __init__(self, vm_size: str = "", vm_priority: str = "dedicated", min_nodes: int = 0, max_nodes: int = 4,
                 idle_seconds_before_scaledown: int = 1800, **kwargs: Any) -> None:
        self.vm_size, self.vm_priority = vm_size, vm_priority
        self.min_nodes, self.max_nodes = min_nodes, max_nodes
        self.idle_seconds_before_scaledown = idle_seconds_before_scaledown
        self.extra = kwargs

    def describe(self) -> str:
        return f"vm_size={self.vm_size or 'default'}, max_nodes={self.max_nodes}"


class AmlCompute(ComputeTarget):
    @staticmethod
    def provisioning_configuration(vm_size: str = "", vm_priority: str = "dedicated", min_nodes: int = 0,
                                   max_nodes: int = 4, idle_seconds_before_scaledown: int = 1800,
                                   **kwargs: Any) -> AmlComputeProvisioningConfiguration:
        return AmlComputeProvisioningConfiguration(vm_size, vm_priority, min_nodes, max_nodes,
                                                   idle_seconds_before_scaledown, **kwargs)

    @staticmethod
    def supported_vmsizes(workspace: Any, location: Optional[str] = None) -> List[Dict[str, Any]]:
        return []


class ComputeInstance(ComputeTarget):
    @staticmethod
    def provisioning_configuration(*args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported("ComputeInstance", "your own machine is the compute instance: use compute 'local'")


__all__ = ["AmlCompute", "AmlComputeProvisioningConfiguration", "ComputeInstance", "ComputeTarget"]


from azureml.core._refused import OTHER_COMPUTE, module_getattr  # noqa: E402

__getattr__ = module_getattr("azureml.core.compute", {name: OTHER_COMPUTE for name in (
    "DataFactoryCompute", "BatchCompute", "AdlaCompute", "DatabricksCompute", "AksCompute", "KubernetesCompute",
    "HDInsightCompute", "RemoteCompute", "SynapseCompute", "KustoCompute")})
