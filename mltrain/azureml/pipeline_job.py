"""A pipeline job (reference-yaml-job-pipeline) mapped onto mltrain's pipelines (mltrain.pipelines):
each of its `jobs` becomes a step (one run each, the pipeline's own run, reuse that explains itself,
`afterok` on Slurm). `${{parent.inputs.x}}` is replaced by the pipeline's input before a step is
checked, so a component sees the value it will run with; `${{parent.jobs.a.outputs.y}}` becomes the
step input `a.outputs.y` (the edge of the graph); `${{parent.outputs.z}}` names the step's own output
folder as the pipeline's output z.

A primitive output of a step (`{type: string}`; mldesigner's `-> str`, `-> Output(type="integer")`, a
group's fields) is a value the step writes to the file `${{outputs.y}}` names (job_io.VALUE_FILE in its
folder); a later step's input bound to it receives the VALUE, as Azure passes it. It is known only once
the producer has run, so it is read where the consumer runs, when it starts (locally, or on Slurm after
its `afterok` dependency): the consumer's command line reads `$AZURE_ML_INPUT_x`, which its own shell sets
from the producer's file before the command runs (a file that is not there stops the step in one line).
A reused producer's folder is linked, its value file with it.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, List, Optional, Tuple

from mltrain.azureml import command_job, component_files, parallel_job, sweep_step, v2_schema
from mltrain.azureml.builtin_components import folders, lookup, step_overrides
from mltrain.azureml.job_create import GROUP, JobCreate, Plan, file_name, ignored_note, record
from mltrain.azureml.job_io import VALUE_FILE, Output, parse_inputs, parse_outputs
from mltrain.azureml.pipeline_components import flatten
from mltrain.azureml.references import DEFAULT_DATASTORE_EXPRESSION, asset_name, config_dirs, fetched_when
from mltrain.azureml.v2_schema import PIPELINE, SETTINGS, check_fields
from mltrain.azureml.yaml_lines import JobFile

STEP_TYPES = ("command", "sweep", "pipeline", "parallel")
#: The output name that stands for a job's whole artifact store (hello-pipeline-default-artifacts).
ARTIFACTS = "artifacts"
Aliases = Dict[Tuple[str, str], Tuple[str, str]]
#: (step, output) -> its primitive type, for the outputs that are values
Values = Dict[Tuple[str, str], str]
#: Where a value input's text goes in a rendered command, before its quoting is known (_value_references)
VALUE_MARK, VALUE_END = "@@mltrain-value:", "@@"
PARENT_JOB_OUTPUT = re.compile(r"^jobs\.([A-Za-z0-9_-]+)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)$")


def plan(jf: JobFile, request: JobCreate, ctx: command_job.Context, name: Optional[str]) -> Plan:
    jf.data = _pipeline_default_datastore(jf.data)
    data = check_fields(jf, (), jf.data, PIPELINE)
    settings = v2_schema.require_mapping(jf, ("settings",), data.get("settings"))
    notes_settings = _unknown_settings(settings)
    ctx = command_job.Context(ctx.dry_run, ctx.on_cluster, ctx.job_name, in_pipeline=True)
    for step, body in (data.get("jobs") or {}).items() if isinstance(data.get("jobs"), dict) else ():
        if isinstance(body, dict):  # an Azure-only node is the line, before the data it would read
            v2_schema.refuse_azure_only(jf, ("jobs", step), body.get("type"))
    parse_inputs(jf, ("inputs",), data.get("inputs"), ctx.dry_run)  # checked whole before a step binds one
    top_outputs = parse_outputs(jf, ("outputs",), data.get("outputs"), ctx.dry_run, ctx.job_name)
    raw_jobs = check_fields(jf, ("jobs",), data.get("jobs"), list(data.get("jobs") or {}))
    if not raw_jobs:
        raise jf.error(("jobs",), "a pipeline job needs at least one job")
    pipe = file_name(str(data.get("display_name") or name or ctx.job_name))
    inherited = {"compute": settings.get("default_compute")}
    steps: Dict[str, Dict[str, Any]] = {}
    files: Dict[str, Dict[str, Any]] = {}
    notes = ignored_note(jf) + notes_settings
    lines = [f"pipeline job {pipe}: {len(raw_jobs)} jobs"]
    declared: Dict[str, List[str]] = {}
    parsed: Dict[str, Tuple[str, Any]] = {}
    where_of: Dict[str, Tuple[JobFile, tuple]] = {}
    flat, aliases = flatten(jf, raw_jobs, data.get("inputs") or {})
    for fs in flat:
        step, where, body, file = fs.name, fs.where, fs.body, fs.file
        kind = v2_schema.job_type(file, body, where=where) if "type" in body else "command"
        if kind not in STEP_TYPES:
            raise file.error(where + ("type",), f"'{kind}' is not one of {', '.join(STEP_TYPES)}")
        if kind == "sweep":  # a step whose run is a sweep; its outputs are its best trial's
            parsed[step] = ("sweep", (sweep_step.parse(file, where, body, ctx, inherited["compute"]), body))
        elif kind == "parallel":
            parsed[step] = ("parallel", parallel_job.parse(file, where, body, ctx, inherited))
        else:
            parsed[step] = _command_step(file, where, body, ctx, inherited)
        where_of[step] = (file, where)
        if parsed[step][0] in ("command", "sweep", "parallel") and fs.top:
            _pipeline_output_paths(_job_of(parsed[step]), top_outputs, sweep=parsed[step][0] == "sweep")
        declared[step] = list(_job_of(parsed[step]).outputs) if parsed[step][0] != "builtin" else \
            list(parsed[step][1]["outputs"])
    for step, (kind, job) in parsed.items():
        if kind == "builtin":  # a Designer port is the folder the component writes (trained_model -> model)
            for port, folder in folders(job["component"]).items():
                if folder != port:
                    aliases[(step, port)] = (step, folder)
    for outer, port in aliases:
        declared.setdefault(outer, []).append(port)
    values: Values = {(step, out.name): out.type for step, p in parsed.items() if p[0] != "builtin"
                      for out in _job_of(p).outputs.values() if out.is_value}
    _read_outputs_with_paths(parsed)
    for step, (kind, job) in parsed.items():
        file, where = where_of[step]
        if kind == "builtin":
            steps[step] = _builtin_step(file, where, job, declared, pipe, step, files, aliases)
        elif kind == "sweep":
            steps[step] = _sweep_step(file, where, job, declared, pipe, step, files, aliases, request, inherited)
            job = job[0].trial
        elif kind == "parallel":
            steps[step] = _parallel_step(file, where, job, declared, pipe, step, files, aliases)
            job = job.command
        else:
            steps[step] = _step(file, where, job, declared, pipe, step, files, aliases, values)
        for out in (job.outputs.values() if kind != "builtin" else []):
            if out.binding is not None:
                target = out.binding.split(".", 1)[1] if out.binding.startswith("outputs.") else None
                if target is None or target not in top_outputs:
                    raise file.error(where + ("outputs", out.name), f"${{{{parent.{out.binding}}}}}: the pipeline "
                                                                  f"has no output '{target or out.binding}'")
        lines.append(f"  {step}: inputs [{', '.join(f'{k}<-{_shown(v, values)}' for k, v in steps[step]['inputs'].items())}] "
                     f"outputs [{', '.join(steps[step]['outputs'])}]"
                     + (" (a sweep: its best trial's outputs)" if kind == "sweep" else ""))
        notes += job.notes if kind != "builtin" else []
    if values and ctx.dry_run:
        lines.append("  (a dry run: a value a step returns is not known until that step has run; the step that "
                     "reads it reads it when it starts)")
    node: Dict[str, Any] = {"steps": steps}
    if settings.get("force_rerun") is not None:
        node["force_rerun"] = bool(settings["force_rerun"])
    # Azure's default is false: a failed step stops the whole pipeline (mltrain's own pipelines go on)
    go_on = settings.get("continue_on_step_failure", False)
    if not isinstance(go_on, bool):
        raise jf.error(("settings", "continue_on_step_failure"), f"{go_on!r} is not true or false")
    node["continue_on_step_failure"] = go_on
    files[f"pipeline/{pipe}.yaml"] = node
    common = {"azureml": record(jf, "pipeline")}
    for rel in list(files):
        if rel.startswith(GROUP + "/"):
            files[rel] = {**files[rel], **common}
    overrides = [f"pipeline={pipe}"]
    if name:
        overrides.append(f"run.id={name}")
    return Plan("pipeline", overrides, files, _dedupe(notes), lines)


def _job_of(parsed: Tuple[str, Any]) -> command_job.CommandJob:
    """The command job of a parsed step: its own, a sweep step's trial, a parallel step's inputs and outputs."""
    if parsed[0] == "parallel":
        found: command_job.CommandJob = parsed[1].command
        return found
    return parsed[1][0].trial if parsed[0] == "sweep" else parsed[1]


def _sweep_step(jf: JobFile, where: tuple, parsed: Tuple[Any, Dict[str, Any]], declared: Dict[str, List[str]],
                pipe: str, step: str, files: Dict[str, Dict[str, Any]], aliases: Aliases, request: JobCreate,
                inherited: Dict[str, Any]) -> Dict[str, Any]:
    """A sweep step: one run of the pipeline, whose program runs the sweep (mltrain.command.sweep_step_program)."""
    sweep, body = parsed
    trial = sweep.trial
    inputs: Dict[str, Any] = {}
    for inp in trial.inputs.values():
        if inp.binding is not None:
            inputs[inp.name] = _upstream(jf, where + ("inputs", inp.name), inp.binding, declared, aliases)
    option = f"{pipe}__{step}"
    files[f"{GROUP}/{option}.yaml"] = sweep_step.step_values(jf, where, body, sweep, request.overrides,
                                                             inherited.get("compute"))
    out: Dict[str, Any] = {"overrides": ["job=command", "environment=current", "distribution=none",
                                         f"+{GROUP}={option}"],
                           "inputs": inputs, "outputs": [o.name for o in trial.outputs.values() if o.path is None],
                           "allow_reuse": trial.deterministic, "controller": True}
    if trial.version is not None:
        out["version"] = trial.version
    return out


def _pipeline_output_paths(job: command_job.CommandJob, top: Dict[str, Output], sweep: bool = False) -> None:
    """A step output bound to a pipeline output that names its own path is found there, as Azure writes
    a pipeline output where its `path` says: a file is written there; a folder stays the step's own
    (so later steps read it and reuse sees it) and the path links to it. A sweep step's trials all
    write their own outputs: the best trial's is put at the path once the sweep has ended."""
    for out in job.outputs.values():
        name = out.binding.split(".", 1)[1] if out.binding and out.binding.startswith("outputs.") else None
        if name in top and top[name].path is not None:
            if top[name].type == "uri_file" and not sweep:
                out.path, out.type, out.binding = top[name].path, top[name].type, None
            else:
                out.link, out.binding = top[name].path, None
                out.type = top[name].type if sweep else out.type  # a bound step output takes the pipeline's type


def _read_outputs_with_paths(parsed: Dict[str, Tuple[str, Any]]) -> None:
    """A step's folder output with a `path` of its own that a later step reads (Azure's notebook 1b sets
    `node.outputs.x = Output(path="azureml://datastores/...")` and binds it): the step writes its own
    output folder, which the engine passes on and reuse sees, and the path links to it, as for a pipeline
    output with a path (_pipeline_output_paths)."""
    read = set()
    for kind, job in parsed.values():
        inputs = job["inputs"].values() if kind == "builtin" else _job_of((kind, job)).inputs.values()
        for inp in inputs:
            match = PARENT_JOB_OUTPUT.match(inp.binding or "")
            if match:
                read.add(match.groups())
    for step, (kind, job) in parsed.items():
        if kind != "command":
            continue
        for out in job.outputs.values():
            if (step, out.name) in read and out.path is not None and out.type != "uri_file" and not out.is_value:
                out.link, out.path = out.path, None


def _unknown_settings(settings: Dict[str, Any]) -> List[str]:
    """Azure passes settings it does not know on to its service without refusing them (its own example
    3a_basic_pipeline writes `default_datestore`); mltrain says which it ignores."""
    out = []
    for key in settings:
        if key not in SETTINGS:
            close = v2_schema.nearest(key, SETTINGS)
            out.append(f"settings.{key}: not a pipeline setting{f' (did you mean {close}?)' if close else ''}; "
                       "ignored")
    return out


def _command_step(jf: JobFile, where: tuple, body: Dict[str, Any], ctx: command_job.Context,
                  inherited: Dict[str, Any]) -> Tuple[str, Any]:
    if body.get("component") is None:
        known = v2_schema.COMMAND
        inline = {k: v for k, v in body.items() if k != "type"}
        return "command", command_job.parse(jf, where, inline, ctx, known=known, inherited=inherited)

    ref = body["component"] if isinstance(body["component"], dict) else str(body["component"])
    registered = asset_name(ref) if isinstance(ref, str) else None
    builtin = lookup(registered) if registered else None
    if builtin is not None and registered and not _registered_locally(jf, registered):
        return "builtin", {"component": builtin, "inputs": parse_inputs(jf, where + ("inputs",), body.get("inputs"),
                                                                         ctx.dry_run, True),
                           "outputs": list(folders(builtin)), "body": body, "notes": []}
    comp = component_files.load_component(jf, where + ("component",), ref)
    job = component_files.bind(comp, jf, where, body.get("inputs"), body.get("outputs"), ctx, inherited, body)
    job.version, job.deterministic = comp.version, comp.is_deterministic
    return "command", job


def _registered_locally(jf: JobFile, name: str) -> bool:

    return any((d / "components" / f"{name}{s}").is_file() for d in config_dirs(jf) for s in (".yml", ".yaml"))


def _upstream(jf: JobFile, where: tuple, binding: str, declared: Dict[str, List[str]], aliases: Aliases) -> str:
    match = PARENT_JOB_OUTPUT.match(binding)
    if not match:
        raise jf.error(where, f"${{{{parent.{binding}}}}} is not a binding mltrain knows (parent.inputs.X, "
                              "parent.jobs.J.outputs.Y, parent.outputs.Z)")
    step, output = match.groups()
    if (step, output) in aliases:  # a pipeline component's output: the inner step that writes it
        step, output = aliases[(step, output)]
        while (step, output) in aliases:
            step, output = aliases[(step, output)]
        return f"{step}.outputs.{output}"
    if step not in declared:
        raise jf.error(where, f"${{{{parent.{binding}}}}}: no job '{step}' in this pipeline "
                              f"(jobs: {', '.join(declared)})")
    if output not in declared[step]:
        raise jf.error(where, f"${{{{parent.{binding}}}}}: job '{step}' has no output '{output}' "
                              f"(outputs: {', '.join(declared[step]) or 'none'})")
    return f"{step}.outputs.{output}"


def _step(jf: JobFile, where: tuple, job: command_job.CommandJob, declared: Dict[str, List[str]], pipe: str,
          step: str, files: Dict[str, Dict[str, Any]], aliases: Aliases, values: Values) -> Dict[str, Any]:
    inputs: Dict[str, Any] = {}
    read: List[str] = []  # the shell lines that read the values this step's inputs receive
    for inp in job.inputs.values():
        if inp.binding is not None:
            inputs[inp.name] = _upstream(jf, where + ("inputs", inp.name), inp.binding, declared, aliases)
            if _value_of(inputs[inp.name], values) is not None:
                read.append(_read_value(jf, where + ("inputs", inp.name), inp, inputs[inp.name], values))
        elif inp.path is not None:
            inputs[inp.name] = _graph_input(inp)
    outputs = [o.name for o in job.outputs.values() if o.path is None]

    def output_path(out: Output) -> str:
        if out.path is None and out.is_value:  # the file its value is written to
            return f"${{outputs.{out.name}}}/{VALUE_FILE}"
        return out.path if out.path is not None else f"${{outputs.{out.name}}}"

    def input_path(inp: Any) -> str:
        if inp.binding is not None and inp.binding.endswith(f".outputs.{ARTIFACTS}"):
            # Azure's `artifacts` output is the job's whole artifact store (./outputs, ./logs): its run folder
            return f"${{inputs.{inp.name}}}/../.."
        if _value_of(inputs.get(inp.name), values) is not None:
            return f"{VALUE_MARK}{inp.name}{VALUE_END}"
        return f"${{inputs.{inp.name}}}"

    body = _value_references(command_job.render_command(job, output_path, input_path,
                                                        lambda n: f"$AML_PARAMETER_{n}", pipe))
    pre = "; ".join(x for x in [command_job.prologue(job, standalone_outputs=False), *read] if x)
    command = command_job.wrap(job, body, pre)
    values = command_job.config_values(job, command, "empty_code")
    values.pop("inputs", None)  # the pipeline engine names every step's inputs and outputs itself
    option = f"{pipe}__{step}"
    files[f"{GROUP}/{option}.yaml"] = values
    out: Dict[str, Any] = {"overrides": command_job.groups(job) + [f"+{GROUP}={option}"], "inputs": inputs,
                           "outputs": outputs, "allow_reuse": job.deterministic}
    if job.version is not None:
        out["version"] = job.version
    return out


def _parallel_step(jf: JobFile, where: tuple, par: parallel_job.ParallelJob, declared: Dict[str, List[str]],
                   pipe: str, step: str, files: Dict[str, Dict[str, Any]], aliases: Aliases) -> Dict[str, Any]:
    """A parallel node: one run of job=parallel, its inputs and outputs bound as a command step's."""
    job = par.command
    inputs: Dict[str, Any] = {}
    for inp in job.inputs.values():
        if inp.binding is not None:
            inputs[inp.name] = _upstream(jf, where + ("inputs", inp.name), inp.binding, declared, aliases)
        elif inp.path is not None:
            inputs[inp.name] = inp.path
    values, notes = parallel_job.config_values(par, lambda o: o.path if o.path is not None else f"${{outputs.{o.name}}}",
                                               lambda i: f"${{inputs.{i.name}}}", pipe, "empty_code")
    par.command.notes.extend(notes)
    values.pop("inputs", None)  # the pipeline engine names every step's inputs and outputs itself
    option = f"{pipe}__{step}"
    files[f"{GROUP}/{option}.yaml"] = values
    out: Dict[str, Any] = {"overrides": parallel_job.groups(par) + [f"+{GROUP}={option}"], "inputs": inputs,
                           "outputs": [o.name for o in job.outputs.values() if o.path is None],
                           "allow_reuse": job.deterministic}
    return out


def _builtin_step(jf: JobFile, where: tuple, spec: Dict[str, Any], declared: Dict[str, List[str]], pipe: str,
                  step: str, files: Dict[str, Dict[str, Any]], aliases: Aliases) -> Dict[str, Any]:
    comp = spec["component"]
    parameters = {p.name for p in comp.parameters}
    inputs: Dict[str, Any] = {}
    values: Dict[str, Any] = {}
    for inp in spec["inputs"].values():
        where_in = where + ("inputs", inp.name)
        if inp.name in parameters:
            values[inp.name] = inp.value
        elif inp.binding is not None:
            inputs[inp.name] = _upstream(jf, where_in, inp.binding, declared, aliases)
        elif inp.path is not None:
            inputs[inp.name] = _graph_input(inp)
        else:
            raise jf.error(where_in, f"{comp.display_name} takes a path here")
    found, problem = step_overrides(comp, list(inputs), values)
    if problem is not None:
        raise jf.error(where + ("inputs",), f"step {step}: {problem}")
    return {"overrides": found, "inputs": inputs, "outputs": sorted(set(folders(comp).values()))}


def _pipeline_default_datastore(data: Any) -> Any:
    """Azure's `${{default_datastore}}` is the pipeline's `settings.default_datastore` where it sets one (else
    the workspace's default, mltrain.azureml.references): written in where this file uses it."""
    settings = data.get("settings") if isinstance(data, dict) else None
    store = settings.get("default_datastore") if isinstance(settings, dict) else None
    if not isinstance(store, str) or not store:
        return data
    name = store[len("azureml:"):] if store.startswith("azureml:") else store

    def put(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        return DEFAULT_DATASTORE_EXPRESSION.sub(name, value) if isinstance(value, str) else value

    return put(data)


def _value_of(upstream: Any, values: Values) -> Optional[str]:
    """The primitive type of the step output `upstream` (`STEP.outputs.NAME`), None for data."""
    if not isinstance(upstream, str) or ".outputs." not in upstream:
        return None
    step, output = upstream.split(".outputs.", 1)
    return values.get((step, output))


def _read_value(jf: JobFile, where: tuple, inp: Any, upstream: str, values: Values) -> str:
    """The shell line that sets $AZURE_ML_INPUT_<name> to the value the upstream step wrote, when this
    step starts (its own process, after its parents on Slurm); no value there: the step stops in one line."""
    kind = _value_of(upstream, values)
    producer, output = upstream.split(".outputs.", 1)
    if inp.is_data:
        raise jf.error(where, f"${{{{parent.{inp.binding}}}}} is the {kind} value step {producer} returns, not data: "
                              f"bind it to an input of type string, integer, number or boolean (this one is "
                              f"{inp.type})")
    name, path = inp.name, f'"${{inputs.{inp.name}}}/{VALUE_FILE}"'
    said = (f"mltrain: input {name} reads the {kind} value of {upstream}, but step {producer} wrote none "
            f"(no file ${{inputs.{name}}}/{VALUE_FILE}: a primitive output is written to the file "
            f"$AZURE_ML_OUTPUT_{output} names)")
    return (f'if [ -f {path} ]; then AZURE_ML_INPUT_{name}="$(cat {path})"; export AZURE_ML_INPUT_{name}; '
            f"else echo {shlex.quote(said)} >&2; exit 2; fi")


def _value_references(body: str) -> str:
    """Each value input's mark in a rendered command replaced by `$AZURE_ML_INPUT_<name>`, quoted for where
    it stands: Azure writes the value into the command as text, and mldesigner's commands put it inside
    single quotes (`word='${{inputs.word}}'`), where a shell variable is not expanded."""
    out: List[str] = []
    i, quote = 0, ""
    while i < len(body):
        if body.startswith(VALUE_MARK, i):
            end = body.index(VALUE_END, i + len(VALUE_MARK))
            var = f"$AZURE_ML_INPUT_{body[i + len(VALUE_MARK):end]}"
            # unquoted: one word; in '...': closed, the variable in "...", reopened; in "...": ended by ""
            out.append({"": f'"{var}"', "'": f"'\"{var}\"'", '"': f'{var}""'}[quote])
            i = end + len(VALUE_END)
            continue
        ch = body[i]
        if ch == "\\" and quote != "'":
            out.append(body[i:i + 2])
            i += 2
            continue
        if ch in "'\"" and quote in ("", ch):
            quote = "" if quote else ch
        out.append(ch)
        i += 1
    return "".join(out)


def _graph_input(inp: Any) -> Any:
    """A step's data input as the pipeline engine reads it: its path, and for a web file the address it
    is downloaded from (a dry run's path is not there yet: mltrain.pipelines.graph)."""
    return {"path": inp.path, "url": inp.url} if inp.url is not None else inp.path


def _shown(value: Any, values: Values) -> str:
    if isinstance(value, dict):
        return fetched_when(value["path"], value["url"])
    kind = _value_of(value, values)
    return f"{value} (its {kind} value, read when the step starts)" if kind else str(value)


def _dedupe(notes: List[str]) -> List[str]:
    seen: List[str] = []
    for note in notes:
        if note not in seen:
            seen.append(note)
    return seen
