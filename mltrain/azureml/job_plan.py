"""A v2 job file turned into what mltrain's own command runs: config group choices, one generated
config file per job or step (`+azureml_job=NAME`, a `_global_` file in a folder that exists only for
this command), and for a pipeline its pipeline file. `az ml job create --set` is applied to the file's
data first, so a set field is checked like a written one.
"""
from __future__ import annotations

import copy
import os
import re
from typing import Any, Dict, List, Optional, Sequence

import yaml

from mltrain.azureml import command_job, parallel_job, pipeline_job, sweep_job, v2_schema
from mltrain.azureml.job_create import EMPTY_CODE, GROUP, JobCreate, Plan, file_name, ignored_note, record
from mltrain.azureml.job_io import VALUE_FILE
from mltrain.azureml.references import config_dirs, fetched_when
from mltrain.azureml.yaml_lines import JobFile, JobFileError, load
from mltrain.jobspec.computes import DEFAULT_COMPUTE
from mltrain.launch.request import merge_values


def read(request: JobCreate) -> JobFile:
    jf = load(request.file) if request.data is None else JobFile(request.file, copy.deepcopy(request.data))
    if not isinstance(jf.data, dict):
        raise jf.error((), "a job file is a mapping of fields")
    for item in request.sets:
        apply_set(jf, item)
    return jf


def apply_set(jf: JobFile, item: str) -> None:
    """`--set inputs.lr=0.2`: the value read as YAML (a number stays a number), as `az ml --set` does."""

    if "=" not in item:
        raise JobFileError("--set", item, "expected FIELD=VALUE")
    key, _, raw = item.partition("=")
    parts = [p for p in key.strip().split(".") if p]
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    node = jf.data
    for index, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise jf.error(tuple(parts[:index + 1]), f"--set {key}: this field is not a mapping")
        node = nxt
    node[parts[-1]] = value


def run_name(request: JobCreate, jf: JobFile) -> Optional[str]:
    name = request.name or jf.data.get("name")
    if name is None:
        return None
    name = str(name)
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name):
        raise jf.error(("name",), f"'{name}' is not a valid job name (letters, digits, _ . -)")
    return name


def on_cluster(overrides: Sequence[str]) -> bool:
    return any(o.startswith("compute=") and o.split("=", 1)[1] not in (DEFAULT_COMPUTE, "") for o in overrides)


def plan(request: JobCreate) -> Plan:
    jf = read(request)
    kind = v2_schema.job_type(jf, jf.data)
    name = run_name(request, jf)
    ctx = command_job.Context(dry_run=request.dry_run, on_cluster=on_cluster(request.overrides),
                              job_name=name or os.path.splitext(jf.name)[0])
    if kind == "pipeline":

        found = pipeline_job.plan(jf, request, ctx, name)
        found.config_dirs = [str(d) for d in config_dirs(jf)]
        return found
    experiment = request.experiment_name or jf.data.get("experiment_name") or _default_experiment()
    values: Dict[str, Any] = {"experiment_name": str(experiment), "azureml": record(jf, kind)}
    if name:
        values["run"] = {"id": name}
    notes = ignored_note(jf)
    if kind == "parallel":
        return _parallel(jf, request, ctx, values, notes)
    if kind == "command":
        job = command_job.parse(jf, (), jf.data, ctx)
        body = command_job.render_command(job, _standalone_output, _input_path, _no_search_space(jf), ctx.job_name)
        command = command_job.wrap(job, body, command_job.prologue(job, standalone_outputs=True))
        lines = [f"command job {ctx.job_name}: {body}"]
    else:
        sweep = sweep_job.parse(jf, (), jf.data, ctx)
        job = sweep.trial
        body = command_job.render_command(job, _standalone_output, _input_path, _search_value, ctx.job_name)
        command = command_job.wrap(job, body, command_job.prologue(job, standalone_outputs=True))
        values["sweep"] = sweep_job.sweep_values(sweep)
        lines = [f"sweep job {ctx.job_name}: trial: {body}",
                 *(f"  search_space.{k} = {sweep_job.grammar(v)}  ({v['type']})" for k, v in sweep.space.items())]
    job_values = command_job.config_values(job, command, EMPTY_CODE)
    if kind == "sweep":
        job_values["job"]["params"] = sweep_job.first_values(sweep)
    values.update(merge_values(values, job_values))
    notes += job.notes
    if job.compute is None and jf.data.get("compute") and not ctx.on_cluster:
        notes.append(f"compute {jf.data['compute']} is not mapped in .mltrain/compute/: runs on this machine")
    lines += [f"  inputs.{i.name} = {_shown(i)}" for i in job.inputs.values()]
    lines += [f"  outputs.{o.name} = {o.path or '<run>/outputs/' + o.name}" for o in job.outputs.values()]
    overrides = command_job.groups(job) + [f"+{GROUP}={file_name(ctx.job_name)}"]
    return Plan(kind, overrides, {f"{GROUP}/{file_name(ctx.job_name)}.yaml": values}, notes, lines,
                [str(d) for d in config_dirs(jf)])


def _parallel(jf: JobFile, request: JobCreate, ctx: command_job.Context, values: Dict[str, Any],
              notes: List[str]) -> Plan:
    par = parallel_job.parse(jf, (), jf.data, ctx, {})
    job_values, more = parallel_job.config_values(par, _standalone_output, _input_path, ctx.job_name, EMPTY_CODE)
    values.update(merge_values(values, job_values))
    notes += par.command.notes + more
    job = job_values["job"]
    lines = [f"parallel job {ctx.job_name}: {job['entry_script']} over {job['input_data']} "
             f"({values['distribution']['node_count']} instance(s) x {job.get('max_concurrency_per_instance', 1)} "
             "worker(s))"]
    overrides = parallel_job.groups(par) + [f"+{GROUP}={file_name(ctx.job_name)}"]
    return Plan("parallel", overrides, {f"{GROUP}/{file_name(ctx.job_name)}.yaml": values}, notes, lines,
                [str(d) for d in config_dirs(jf)])


def _default_experiment() -> str:
    # Azure: "defaults experiment_name to the name of the working directory where the job was created".
    return os.path.basename(os.getcwd()) or "mltrain"


def _shown(inp: Any) -> str:
    if inp.url is not None:
        return fetched_when(inp.path, inp.url)
    return str(inp.path if inp.path is not None else inp.value)


def _standalone_output(out: Any) -> str:
    if out.path is not None:
        return out.path
    if out.is_value:  # a primitive output: the file its value is written to
        return f"$MLTRAIN_OUTPUTS_DIR/{out.name}/{VALUE_FILE}"
    return f"$MLTRAIN_OUTPUTS_DIR/{out.name}"


def _input_path(inp: Any) -> str:
    return str(inp.path)


def _search_value(name: str) -> str:
    return f"$AML_PARAMETER_{name}"


def _no_search_space(jf: JobFile):
    def resolve(name: str) -> str:
        raise jf.error(("command",), f"${{{{search_space.{name}}}}} is only for a sweep job's trial")
    return resolve
