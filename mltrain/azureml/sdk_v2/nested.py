"""Nested pipeline components (a `@dsl.pipeline` function called inside another) as one flat pipeline: the
engine runs steps of command and sweep components, so each inner step becomes a step of the outer pipeline
named `OUTER_INNER`, its `${{parent.inputs.X}}` replaced by what the outer node was given for X (or the
pipeline component's default), its `${{parent.outputs.O}}` by what the outer node's output O is bound to,
and every `${{parent.jobs.OUTER.outputs.O}}` elsewhere by the inner step that makes O. Steps then start
as soon as their own inputs exist, as Azure schedules the inner steps of a pipeline component.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, Tuple

Fix = Callable[[Dict[str, Any], Any, Dict[str, Any]], None]
_PARENT_INPUT = re.compile(r"\$\{\{\s*parent\.inputs\.([A-Za-z0-9_]+)\s*\}\}")
_PARENT_OUTPUT = re.compile(r"^\$\{\{\s*parent\.outputs\.([A-Za-z0-9_]+)\s*\}\}$")
LITERAL_CAST = {"integer": int, "number": float}
_SIBLING = re.compile(r"\$\{\{\s*parent\.jobs\.([A-Za-z0-9_]+)\.outputs\.([A-Za-z0-9_]+)\s*\}\}")


def flatten(pipeline: Dict[str, Any], nodes: Dict[str, Any], fix: Fix) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(steps, their node entities) of `pipeline` (a pipeline job's or pipeline component's dump) with every
    step of a pipeline component replaced by its own steps. `fix(step, node, pipeline)` puts a step's
    inputs and outputs as a file writes them before anything is rebound."""
    steps: Dict[str, Any] = {}
    entities: Dict[str, Any] = {}
    made_by: Dict[Tuple[str, str], str] = {}  # (outer step, its output) -> the inner step's output binding
    for name, step in (pipeline.get("jobs") or {}).items():
        node = nodes.get(name)
        if not isinstance(step, dict):
            steps[name], entities[name] = step, node
            continue
        fix(step, node, pipeline)
        component = step.get("component")
        inner = getattr(getattr(node, "component", None), "jobs", None)
        if step.get("type") != "pipeline" or not isinstance(component, dict) or not inner:
            steps[name], entities[name] = step, node
            continue
        inner_steps, inner_entities = flatten(component, dict(inner), fix)
        given = dict(step.get("inputs") or {})
        for key, spec in (component.get("inputs") or {}).items():
            if key not in given and isinstance(spec, dict) and spec.get("default") is not None:
                given[key] = _default(spec)
        bound = step.get("outputs") or {}
        for inner_name, inner_step in inner_steps.items():
            flat = f"{name}_{inner_name}"
            if isinstance(inner_step, dict):
                _rebind(inner_step, name, given, bound, made_by, flat)
            steps[flat], entities[flat] = inner_step, inner_entities.get(inner_name)
    for step in steps.values():
        compute = step.get("compute") if isinstance(step, dict) else None
        named = _PARENT_INPUT.fullmatch(compute.strip()) if isinstance(compute, str) else None
        value = (pipeline.get("inputs") or {}).get(named.group(1)) if named else None
        if isinstance(value, str):  # a pipeline job's compute-name input (a component's inputs are specs)
            step["compute"] = value
    for step in steps.values():  # the outer pipeline's own references to what a nested pipeline made
        ports = step.get("inputs") if isinstance(step, dict) else None
        for port, value in list((ports or {}).items()):
            if isinstance(value, str):
                ports[port] = _SIBLING.sub(lambda m: made_by.get((m.group(1), m.group(2)), m.group(0)), value)
    return steps, entities


def _rebind(step: Dict[str, Any], outer: str, given: Dict[str, Any], bound: Dict[str, Any],
            made_by: Dict[Tuple[str, str], str], flat: str) -> None:
    compute = step.get("compute")
    whole_compute = _PARENT_INPUT.fullmatch(compute.strip()) if isinstance(compute, str) else None
    if whole_compute is not None:  # `node.compute = a_pipeline_input`
        if isinstance(given.get(whole_compute.group(1)), str):
            step["compute"] = given[whole_compute.group(1)]
        else:
            del step["compute"]
    inputs = step.get("inputs") or {}
    for port, value in list(inputs.items()):
        if not isinstance(value, str):
            continue
        whole = _PARENT_INPUT.fullmatch(value.strip())
        if whole is not None:  # the value itself: a literal, an Input or a binding of the outer pipeline
            if whole.group(1) in given:
                inputs[port] = given[whole.group(1)]
            else:
                del inputs[port]  # not given and no default: the component's own default applies
            continue
        value = _PARENT_INPUT.sub(lambda m: str(given.get(m.group(1), m.group(0))), value)
        # a sibling inside the nested pipeline is now a step of the outer one
        inputs[port] = _SIBLING.sub(lambda m: f"${{{{parent.jobs.{outer}_{m.group(1)}.outputs.{m.group(2)}}}}}", value)
    outputs = step.get("outputs") or {}
    for port, value in list(outputs.items()):
        target = _PARENT_OUTPUT.match(value) if isinstance(value, str) else None
        if target is None:
            continue
        made_by[(outer, target.group(1))] = f"${{{{parent.jobs.{flat}.outputs.{port}}}}}"
        if target.group(1) in bound:
            outputs[port] = bound[target.group(1)]
        else:
            del outputs[port]  # the nested pipeline's output is not kept by the outer one: a plain output


def _default(spec: Dict[str, Any]) -> Any:
    """A pipeline component's literal default as a file writes it (the dump writes numbers as text)."""
    value = spec["default"]
    return literal(spec.get("type"), value) if isinstance(value, str) else value


def literal(kind: Any, text: str) -> Any:
    if kind == "boolean":
        return text.strip().lower() == "true"
    cast = LITERAL_CAST.get(str(kind))
    if cast is None:
        return text
    try:
        return cast(text)
    except ValueError:
        return text
