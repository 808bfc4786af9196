"""An azure-ai-ml job entity as the v2 job file it stands for, so that the YAML front end
(mltrain.azureml.job_plan) checks and maps it: every field means what it means in a file, and every
refusal is the same line.

The shape comes from the entity's own dump (the SDK's YAML schema), with two things taken from
the entity's attributes instead: local input and output paths (the dump prefixes them `azureml:`, which
would name a registered asset) resolved against the folder the entity was built in, and the trial of a
sweep, whose `${{inputs.X}}` are the search space's `${{search_space.X}}` when X is swept. Nothing here
imports azure-ai-ml: the entity is read through its attributes, its private ones through the azure-ai-ml fence
(mltrain.azureml.sdk_v2.azure_ai_ml_internals).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Tuple

from mltrain.azureml.sdk_v2 import azure_ai_ml_internals as internals
from mltrain.azureml.sdk_v2.nested import flatten
from mltrain.azureml.sdk_v2.nested import literal as _literal

#: Fields of the dump that say nothing to a run here (empty mappings, the SDK's bookkeeping).
_DROP = ("properties", "parameters", "status", "creation_context", "id", "services")
#: A trial keeps what a sweep job file's `trial` holds.
_TRIAL = ("command", "code", "environment", "environment_variables", "distribution", "resources")
_INPUT_REF = re.compile(r"\$\{\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def job_entity(entity: Any) -> Any:
    """A builder (`command(...)`, a node) as the job it submits; a job as itself."""
    return internals.builder_job(entity)


def kind_of(job: Any) -> str:
    return str(getattr(job, "type", "") or "")


def to_v2(job: Any, folder: str) -> Tuple[str, Dict[str, Any]]:
    """(job type, the v2 job file's data) for a CommandJob, SweepJob or PipelineJob. A pipeline's steps
    name the component file a component was loaded from, or hold the component inline (in memory; `folder`:
    where the submission keeps its files)."""
    kind = kind_of(job)
    data = _clean(internals.entity_dict(job))
    base = internals.base_path(job)
    _fix_io(data, job, base)
    if kind == "sweep":
        data["trial"] = _trial(data, job)
    elif kind == "pipeline":
        def fix(step: Dict[str, Any], node: Any, pipeline: Dict[str, Any]) -> None:
            if node is not None:
                _fix_io(step, node, base)
            _bindings(step, pipeline)

        steps, nodes = flatten(data, dict(getattr(job, "jobs", None) or {}), fix)
        if "jobs" in data:
            data["jobs"] = steps
        for name, step in steps.items():
            node = nodes.get(name)
            if isinstance(step, dict):
                if step.get("type") == "sweep":
                    step["trial"] = _trial(step, node)
                component = step.get("component")
                if isinstance(component, dict):
                    step["component"] = _component(component, internals.node_component(node), name)
    return kind, data


def _clean(value: Any) -> Any:
    """The dump without the SDK's bookkeeping and empty mappings (which a file would leave out)."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _DROP:
                continue
            item = _clean(item)
            if item in ({}, None) and key not in ("inputs", "outputs"):
                continue
            out[str(key)] = item
        return out
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _local(path: Any) -> Optional[str]:
    """A path the user gave as a local file or folder (not `azureml:`, not a URL), else None."""
    if not isinstance(path, str) or not path or path.startswith("azureml:") or "://" in path:
        return None
    if path.startswith("${{"):
        return None
    return path


def _fix_io(data: Dict[str, Any], entity: Any, base: str) -> None:
    """Inputs and outputs as the entity holds them: a path as the user wrote it (a local one absolute; the
    dump prefixes every path `azureml:`), a literal as given (the dump writes False as 0)."""
    for section in ("inputs", "outputs"):
        given = getattr(entity, section, None) or {}
        dumped = data.get(section)
        if not isinstance(dumped, dict):
            continue
        for name, value in given.items():
            value = internals.given_value(value, value)  # a node's input wraps what it was given
            spec = dumped.get(name)
            if isinstance(value, (bool, int, float, str)) and not isinstance(spec, dict) and name in dumped:
                dumped[name] = value
                continue
            if type(value).__name__ not in ("Input", "Output") or not isinstance(spec, dict):
                continue  # a binding (PipelineInput, NodeOutput), a search space, or nothing given
            path = getattr(value, "path", None)
            if not isinstance(path, str) or not path:
                continue
            local = _local(path)
            spec["path"] = os.path.normpath(os.path.join(base, local)) if local is not None else path


def _bindings(step: Dict[str, Any], pipeline: Dict[str, Any]) -> None:
    """A step's port bound to `${{parent...}}` as a file writes it: the binding itself (the dump writes
    `{path: ${{parent.outputs.x}}, mode: upload}`; the mode belongs to the pipeline's output x)."""
    for section in ("inputs", "outputs"):
        ports = step.get(section)
        if not isinstance(ports, dict):
            continue
        for port, spec in list(ports.items()):
            path = spec.get("path") if isinstance(spec, dict) else None
            if not (isinstance(path, str) and path.startswith("${{parent.")):
                continue
            ports[port] = path
            target = re.match(r"^\$\{\{parent\.outputs\.([A-Za-z0-9_]+)\}\}$", path)
            top = (pipeline.get("outputs") or {}).get(target.group(1)) if target else None
            if isinstance(top, dict) and spec.get("mode") and not top.get("mode"):
                top["mode"] = spec["mode"]


def _component(component: Dict[str, Any], entity: Any, step: str) -> Any:
    """The component's own YAML file when it was loaded from one (its refusals then name that file's lines),
    else its dump as an inline component, handed over in memory."""
    source = internals.source_path(entity)
    if source and str(source).endswith((".yml", ".yaml")) and os.path.isfile(str(source)):
        return os.path.abspath(str(source))
    return _component_values(component, step)


def component_text(entity: Any) -> str:
    """A component entity as a component file that stands alone (`code` absolute): its own file's data
    when it was loaded from one, else the SDK's dump."""
    import yaml  # startup

    source = internals.source_path(entity)
    if source and str(source).endswith((".yml", ".yaml")) and os.path.isfile(str(source)):
        with open(str(source), encoding="utf-8") as handle:
            data = yaml.safe_load(handle) or {}
        code = data.get("code")
        if isinstance(code, str) and _local(code) is not None:
            data["code"] = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(str(source))), code))
        return f"# from {source}\n" + yaml.safe_dump(data, sort_keys=False)
    return yaml.safe_dump(_component_values(_clean(internals.entity_dict(entity)), str(entity.name)), sort_keys=False)


def _component_values(component: Dict[str, Any], name: str) -> Dict[str, Any]:
    """The dump writes literal defaults as text (`default: '2'`); a file has numbers."""
    out = {k: v for k, v in component.items() if k != "$schema"}
    if out.get("name") in (None, "azureml_anonymous"):
        out["name"] = name
    for spec in (out.get("inputs") or {}).values():
        if isinstance(spec, dict) and isinstance(spec.get("default"), str):
            spec["default"] = _literal(spec.get("type"), spec["default"])
    return out


def _trial(data: Dict[str, Any], entity: Any) -> Any:
    """A sweep's trial as a sweep file writes it: the component file it was loaded from, or a command whose
    swept inputs are `${{search_space.X}}`, the other literal inputs of the trial's component given to the
    sweep as its inputs."""
    raw = data.get("trial") or {}
    component = getattr(entity, "trial", None)
    source = internals.source_path(component)
    if source and str(source).endswith((".yml", ".yaml")) and os.path.isfile(str(source)):
        return os.path.abspath(str(source))  # a component file: its inputs named in the search space are swept
    swept = set((data.get("search_space") or {}).keys())
    trial = {k: v for k, v in raw.items() if k in _TRIAL}
    command = str(trial.get("command") or "")
    trial["command"] = _INPUT_REF.sub(
        lambda m: f"${{{{search_space.{m.group(1)}}}}}" if m.group(1) in swept else m.group(0), command)
    inputs = data.setdefault("inputs", {})
    given = getattr(entity, "inputs", None) or {}
    for name, spec in (raw.get("inputs") or {}).items():
        if name in swept or name in inputs:
            continue
        value = internals.given_value(given.get(name), None)
        if isinstance(value, (str, int, float, bool)):
            inputs[name] = value
        elif isinstance(spec, dict) and "default" in spec:
            inputs[name] = _literal(spec.get("type"), str(spec["default"]))
    if not inputs:
        data.pop("inputs")
    return trial
