"""A pipeline's `jobs` as one flat list of steps: a `type: pipeline` step (a pipeline component file,
reference-yaml-component-pipeline) is expanded into its own jobs, named `STEP__JOB`, so that mltrain's
pipeline engine runs, reuses and queues them like any other step.

Inside the component, `${{parent.inputs.x}}` is the value the outer step gives its input x (or the
component's default), `${{parent.jobs.j.outputs.y}}` names the expanded `STEP__j`, and an inner output
bound to `${{parent.outputs.z}}` is what the outer pipeline reads as `${{parent.jobs.STEP.outputs.z}}`.
"""
from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from mltrain.azureml import expressions, references
from mltrain.azureml.v2_schema import STEP, check_fields, refuse_azure_only
from mltrain.azureml.yaml_lines import JobFile, load

STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
PIPELINE_COMPONENT = ("$schema", "type", "name", "version", "display_name", "description", "tags", "inputs",
                      "outputs", "jobs", "is_deterministic")


@dataclass
class FlatStep:
    name: str                  # the engine's step name
    file: JobFile              # the file the step is written in (lines, relative paths)
    where: Tuple[Any, ...]     # its field path there
    body: Dict[str, Any]       # its fields, parent inputs bound
    top: bool                  # written in the pipeline job itself


def flatten(jf: JobFile, jobs: Dict[str, Any], parent_inputs: Dict[str, Any], prefix: str = "",
            aliases: Dict[Tuple[str, str], Tuple[str, str]] | None = None, depth: int = 0
            ) -> Tuple[List[FlatStep], Dict[Tuple[str, str], Tuple[str, str]]]:
    """Every step, pipeline components expanded; `aliases` maps (outer step, output) to the inner step
    output that produces it."""
    aliases = {} if aliases is None else aliases
    out: List[FlatStep] = []
    for step, body in jobs.items():
        where = ("jobs", step)
        if not STEP_NAME.match(str(step)):
            raise jf.error(where, "a job name takes letters, digits, _ and -")
        if isinstance(body, dict):
            refuse_azure_only(jf, where, body.get("type"))
        # this level's own `${{parent.jobs.j}}` first, then the parent's values (already in the engine's names)
        body = _renamed(dict(check_fields(jf, where, body, STEP)), prefix)
        body = bind_parent_inputs(jf, where, body, parent_inputs)
        full = f"{prefix}{step}"
        if body.get("type") != "pipeline":
            out.append(FlatStep(full, jf, where, body, top=depth == 0))
            continue
        if depth >= 5:
            raise jf.error(where, "pipeline components nest more than 5 deep")
        inner, comp = _component(jf, where, body)
        given = {k: _absolute(jf, where + ("inputs", k), v) for k, v in (body.get("inputs") or {}).items()}
        defaults = {k: spec.get("default") for k, spec in (comp.get("inputs") or {}).items()
                    if isinstance(spec, dict) and spec.get("default") is not None}
        for name in given:
            if name not in (comp.get("inputs") or {}):
                raise jf.error(where + ("inputs", name), f"pipeline component {comp.get('name', '?')} has no input "
                                                         f"'{name}'")
        steps, _ = flatten(inner, comp.get("jobs") or {}, {**defaults, **given}, f"{full}__", aliases, depth + 1)
        for s in steps:
            for port, value in (s.body.get("outputs") or {}).items():
                bound = expressions.binding(value)
                if bound and bound.startswith("outputs."):
                    aliases[(full, bound.split(".", 1)[1])] = (s.name, str(port))
                    s.body["outputs"] = {**s.body["outputs"], port: None}
        out += steps
    return out, aliases


def bind_parent_inputs(jf: JobFile, where: tuple, body: Dict[str, Any], parent: Dict[str, Any]) -> Dict[str, Any]:
    """A step's `${{parent.inputs.x}}` replaced by the parent's input x (a literal or a data input)."""
    inputs = dict(body.get("inputs") or {})
    for key, value in list(inputs.items()):
        bound = expressions.binding(value)
        if bound is None and isinstance(value, dict):
            bound = expressions.binding(value.get("path"))
        if bound is None or not bound.startswith("inputs."):
            continue
        name = bound.split(".", 1)[1]
        if name not in parent:
            raise jf.error(where + ("inputs", key), f"${{{{parent.inputs.{name}}}}}: the pipeline has no input "
                                                    f"'{name}' (inputs: {', '.join(parent) or 'none'})")
        inputs[key] = copy.deepcopy(parent[name])
    out = dict(body)
    if inputs:
        out["inputs"] = inputs
    bound = expressions.binding(out.get("compute"))
    if bound is not None:
        out["compute"] = _bound_compute(jf, where + ("compute",), bound, parent)
    return out


def _bound_compute(jf: JobFile, where: tuple, bound: str, parent: Dict[str, Any]) -> Any:
    """`compute: ${{parent.inputs.x}}`: the compute name the parent's input x holds (Azure promotes a
    step's compute to a pipeline input this way), then mapped like a written one."""
    name = bound.split(".", 1)[1] if bound.startswith("inputs.") else None
    if name is None:
        raise jf.error(where, f"${{{{parent.{bound}}}}}: a compute binds a pipeline input (parent.inputs.X)")
    if name not in parent:
        raise jf.error(where, f"${{{{parent.inputs.{name}}}}}: the pipeline has no input '{name}' "
                              f"(inputs: {', '.join(parent) or 'none'})")
    value = parent[name]
    if isinstance(value, dict):  # {type: string, default: ...} or {value: ...}
        value = value.get("value", value.get("default"))
    if not isinstance(value, str) or not value or expressions.binding(value) is not None:
        raise jf.error(where, f"${{{{parent.inputs.{name}}}}} holds no compute name (got {value!r})")
    return value


def _component(jf: JobFile, where: tuple, body: Dict[str, Any]) -> Tuple[JobFile, Dict[str, Any]]:
    ref = body.get("component")
    if not isinstance(ref, str):
        raise jf.error(where + ("component",), "a pipeline step names its pipeline component file")
    raw = ref[len("file:"):] if ref.startswith("file:") else ref
    path = os.path.join(jf.folder, raw)
    if not os.path.isfile(path):
        raise jf.error(where + ("component",), f"pipeline component file '{ref}' does not exist (relative to "
                                               f"{jf.folder})")
    inner = load(path)
    comp = check_fields(inner, (), inner.data, PIPELINE_COMPONENT)
    if comp.get("type") != "pipeline":
        raise inner.error(("type",), "a `type: pipeline` step needs a pipeline component (type: pipeline)")
    return inner, comp


def _absolute(jf: JobFile, where: tuple, value: Any) -> Any:
    """An outer data input carried into a component file: its path made absolute against the outer file."""
    if isinstance(value, dict) and value.get("path") is not None and expressions.binding(value["path"]) is None:
        # dry_run: nothing is fetched here; a web address stays one, for the step that reads it
        local, url = references.data_input(jf, where + ("path",), value["path"], dry_run=True)
        value = dict(value, path=local if url is None else value["path"])
    return value


def _renamed_binding(value: Any, prefix: str) -> Any:
    """An outer `${{parent.jobs.j...}}` value, with j named as the engine names it at that level."""
    bound = expressions.binding(value)
    if prefix and bound and bound.startswith("jobs."):
        return "${{parent.jobs." + prefix + bound[len("jobs."):] + "}}"
    return value


def _renamed(body: Dict[str, Any], prefix: str) -> Dict[str, Any]:
    if not prefix:
        return body
    out = dict(body)
    inputs = dict(out.get("inputs") or {})
    for key, value in inputs.items():
        bound = expressions.binding(value)
        if bound and bound.startswith("jobs."):
            inputs[key] = _renamed_binding(value, prefix)
    if inputs:
        out["inputs"] = inputs
    return out
