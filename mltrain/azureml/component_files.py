"""Command component files (reference-yaml-component-command) and how a step binds them: `code`
relative to the component file, inputs checked as Azure checks them (a required input missing, a
value outside `enum`, below `min` or above `max`, of the wrong type: one line naming the step and the
input), defaults filled in, `is_deterministic` kept for step reuse.

A component is found by a relative file (`./train.yml`, `file:./train.yml`) or by name
(`azureml:NAME@latest`, `azureml:NAME:V`, `azureml://registries/R/components/NAME/...`) in the
repository's `.mltrain/components/NAME.yml`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mltrain.azureml import command_job, references
from mltrain.azureml.builtin_components import lookup
from mltrain.azureml.job_io import Input, Output, literal_type, parse_inputs, parse_outputs
from mltrain.azureml.v2_schema import COMPONENT, LITERAL_TYPES, PATH_TYPES, check_fields, one_of, require_mapping
from mltrain.azureml.yaml_lines import JobFile, load

PORT_KEYS = ("type", "default", "optional", "enum", "min", "max", "description", "mode", "path")
#: An output port's further fields: a primitive output that is a control output (Azure's control flow)
OUTPUT_PORT_KEYS = PORT_KEYS + ("is_control",)


@dataclass
class Component:
    file: JobFile
    name: str
    version: Optional[str]
    is_deterministic: bool
    inputs: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    outputs: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    body: Dict[str, Any] = field(default_factory=dict)   # command, code, environment, distribution, resources
    notes: List[str] = field(default_factory=list)       # said once by the job that uses it


def load_component(jf: JobFile, where: Sequence[Any], ref: Any) -> Component:
    """The component a step or trial names: a file, a registered name, or a mapping inline (its `code` relative to
    `jf`'s folder; azure-ai-ml's entities hand theirs over so, in memory)."""
    where = tuple(where)
    if isinstance(ref, dict):
        comp = jf.inner(where, ref)
    else:
        comp = load(str(_component_path(jf, where, str(ref))))
    data = require_mapping(comp, (), comp.data)
    # Azure's loader takes a component's unknown top-level fields and ignores them: so does mltrain, said once
    unknown = [str(k) for k in data if k not in COMPONENT]
    notes = [f"{comp.name}: {', '.join(unknown)}: not a field of a command component; ignored, as Azure's loader "
             "does"] if unknown else []
    kind = data.get("type", "command")
    if kind != "command":
        raise comp.error(("type",), f"'{kind}' components are not supported: mltrain runs command components")
    ports_in = {}
    for port, spec in (data.get("inputs") or {}).items():
        spec = check_fields(comp, ("inputs", port), spec, PORT_KEYS)
        one_of(comp, ("inputs", port, "type"), spec.get("type"), LITERAL_TYPES + PATH_TYPES)
        ports_in[str(port)] = spec
    ports_out = {}
    for port, spec in (data.get("outputs") or {}).items():
        spec = check_fields(comp, ("outputs", port), spec or {}, OUTPUT_PORT_KEYS)
        # a primitive output (string, integer, number, boolean) is a value the command writes (job_io.VALUE_FILE)
        one_of(comp, ("outputs", port, "type"), spec.get("type", "uri_folder"), PATH_TYPES + LITERAL_TYPES)
        ports_out[str(port)] = spec
    body = {k: data[k] for k in ("command", "code", "environment", "distribution", "resources") if k in data}
    if "instance_count" in data:
        body.setdefault("resources", {})["instance_count"] = data["instance_count"]
    name = data.get("name") or (where[-2] if isinstance(ref, dict) and len(where) > 1 else Path(comp.path).stem)
    return Component(comp, str(name),
                     None if data.get("version") is None else str(data["version"]),
                     bool(data.get("is_deterministic", True)), ports_in, ports_out, body, notes)


def _component_path(jf: JobFile, where: tuple, raw: str) -> Path:
    name = references.asset_name(raw)
    if name is not None:
        return _registered(jf, where, raw, name)
    local = raw[len("file:"):] if raw.startswith("file:") else raw
    path = Path(jf.folder) / local
    if not path.is_file():
        raise jf.error(where, f"component file '{raw}' does not exist (relative to {jf.folder})")
    return path


def _registered(jf: JobFile, where: tuple, raw: str, name: str) -> Path:
    for base in references.config_dirs(jf):
        for suffix in (".yml", ".yaml"):
            candidate = base / "components" / f"{name}{suffix}"
            if candidate.is_file():
                return candidate

    if lookup(name) is not None:
        raise jf.error(where, f"'{raw}' is a built-in component; it runs as a pipeline step of its own kind")
    dirs = references.config_dirs(jf)
    raise jf.error(where, f"component '{raw}' is not registered here: add {dirs[0] if dirs else '.mltrain'}/"
                          f"components/{name}.yml (its command component file)")


def bind(comp: Component, jf: JobFile, where: Sequence[Any], inputs_node: Any, outputs_node: Any,
         ctx: command_job.Context, inherited: Dict[str, Any], step: Optional[Dict[str, Any]] = None,
         searched: Sequence[str] = ()) -> command_job.CommandJob:
    """The command job a step (or a sweep's trial) makes of a component with its inputs and outputs.
    `step` holds the step's own command-job fields that override the component's (compute, resources,
    distribution, environment_variables, limits). `searched`: a sweep's search-space parameters, which
    set the component's inputs of the same name (`${{inputs.X}}` reads the trial's value, as in Azure)."""
    where = tuple(where)
    body = dict(comp.body)
    for key, value in (step or {}).items():
        if key in ("compute", "resources", "distribution", "environment_variables", "limits", "environment"):
            body[key] = value
    if step and step.get("compute") is not None:  # an unmapped name is the step's line, not the component's
        references.compute(jf, where + ("compute",), step["compute"])
    if "compute" not in body and inherited.get("compute") is not None:
        body["compute"] = inherited["compute"]
    sub_ctx = command_job.Context(ctx.dry_run, ctx.on_cluster, ctx.job_name, ctx.in_pipeline)
    job = command_job.parse(comp.file, (), body, sub_ctx, check_refs=False)
    job.notes += comp.notes
    given = parse_inputs(jf, where + ("inputs",), inputs_node, ctx.dry_run, ctx.in_pipeline)
    step_name = where[-1] if where else comp.name
    for name in given:
        if name not in comp.inputs:
            raise jf.error(where + ("inputs", name), f"component {comp.name} has no input '{name}' "
                                                     f"(inputs: {', '.join(comp.inputs) or 'none'})")
    for name, spec in comp.inputs.items():
        if name in searched:
            job.command = re.sub(r"\$\{\{\s*inputs\." + re.escape(name) + r"\s*\}\}", f"${{{{search_space.{name}}}}}",
                                 job.command)
            continue
        job.inputs[name] = _checked(jf, where + ("inputs", name), step_name, name, spec, given.get(name), comp,
                                    job.notes, ctx.dry_run)
    outs = parse_outputs(jf, where + ("outputs",), outputs_node, ctx.dry_run, ctx.job_name, ctx.in_pipeline)
    for name in outs:
        if name not in comp.outputs:
            raise jf.error(where + ("outputs", name), f"component {comp.name} has no output '{name}' "
                                                      f"(outputs: {', '.join(comp.outputs) or 'none'})")
    for name, spec in comp.outputs.items():
        out = outs.get(name) or Output(name)
        out.type = str(spec.get("type", "uri_folder")) if out.binding is None else out.type
        job.outputs[name] = out
    job.inputs = {k: v for k, v in job.inputs.items() if v is not None}
    command_job.check_references(job)
    return job


def _checked(jf: JobFile, where: tuple, step: Any, name: str, spec: Dict[str, Any], given: Optional[Input],
             comp: Component, notes: List[str], dry_run: bool) -> Optional[Input]:
    """A step's value for one component input, checked against the component's declaration. Where
    Azure passes a value on without enforcing the declaration (an `enum`; 'True'/'False' written as
    text for a boolean), so does mltrain, and `notes` says so once."""
    kind = str(spec.get("type"))
    label = f"step {step} input {name}"
    if given is None:
        if "default" in spec and spec["default"] is not None:
            if kind in PATH_TYPES:
                path, url = references.data_input(comp.file, ("inputs", name, "default"), spec["default"], dry_run)
                return Input(name, kind, path=path, url=url)
            return Input(name, kind, value=spec["default"])
        if spec.get("optional"):
            return Input(name, kind)  # left out of the command by its $[[...]] block
        raise jf.error(where[:-1], f"{label} is required by component {comp.name} and has no default")
    if given.binding is not None:
        return Input(name, kind if kind in PATH_TYPES or given.type != "binding" else kind, binding=given.binding,
                     mode=given.mode)
    if kind in PATH_TYPES:
        if not given.is_data:
            raise jf.error(where, f"{label}: component {comp.name} declares {kind}, got a {given.type} literal")
        return Input(name, kind, path=given.path, mode=given.mode, url=given.url)
    value = given.value
    have = literal_type(value)
    if kind == "number" and have == "integer":
        have = "number"
    if kind == "string":
        value, have = str(value), "string"
    if kind == "boolean" and have == "string" and str(value).lower() in ("true", "false"):
        # Azure's loader takes the text and the command receives it as written
        notes.append(f"{label}: {value!r} is text where component {comp.name} declares a boolean; passed on as "
                     "written, as Azure does")
        have = "boolean"
    if have != kind:
        raise jf.error(where, f"{label}: {value!r} is not of type {kind}")
    enum = spec.get("enum")
    if enum is not None and value not in enum and str(value) not in [str(e) for e in enum]:
        # Azure neither loads nor runs a component's enum as a check (its own Designer samples rely on it)
        notes.append(f"{label}: {value!r} is outside the enum of component {comp.name} "
                     f"({', '.join(map(str, enum))}); passed on as Azure does")
    if spec.get("min") is not None and value < spec["min"]:
        raise jf.error(where, f"{label}: {value} is below its min {spec['min']}")
    if spec.get("max") is not None and value > spec["max"]:
        raise jf.error(where, f"{label}: {value} is above its max {spec['max']}")
    return Input(name, kind, value=value)
