"""A v2 parallel job (reference-yaml-job-parallel), alone or as a pipeline node, turned into mltrain's
`job=parallel` (mltrain.parallel.program): `task.code` and `task.entry_script` are the job's code,
`input_data`, `task.program_arguments` and `task.append_row_to` are filled in as a command's expressions are
(the same inputs, outputs, environment and compute as a command job: mltrain.azureml.command_job), and
`resources.instance_count` is the number of agents (`distribution.node_count`).

The arguments Azure's runtime reads from `program_arguments` are honoured where they mean something here
(`--error_threshold`, `--allowed_failed_percent`, `--mini_batch_error_threshold`, `--run_invocation_timeout`,
`--process_count_per_node`, `--append_row_file_name`) and said once where they do not; the entry script still
sees them all in sys.argv, as on Azure.
"""
from __future__ import annotations

import dataclasses
import posixpath
import shlex
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

from mltrain.azureml import command_job
from mltrain.azureml.v2_schema import COMMAND, COMMON, PATH_TYPES, check_fields, number, one_of, text
from mltrain.azureml.yaml_lines import JobFile, load

PARALLEL = COMMON + ("task", "input_data", "mini_batch_size", "resources", "max_concurrency_per_instance",
                     "mini_batch_error_threshold", "error_threshold", "logging_level", "retry_settings",
                     "environment_variables", "partition_keys", "output_action", "component", "is_deterministic")
TASK = ("type", "code", "entry_script", "environment", "program_arguments", "append_row_to", "model", "fn", "args")
RETRY = ("max_retries", "timeout")
#: A parallel component's own fields, not the node's (its ports are bound to the node's inputs and outputs).
COMPONENT_ONLY = ("$schema", "name", "version", "display_name", "description", "tags", "type", "is_deterministic",
                  "inputs", "outputs")
LOGGING = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Azure's runtime arguments that mltrain's engine honours: argument -> the job field it sets.
HONOURED = {"--error_threshold": "error_threshold", "--allowed_failed_percent": "allowed_failed_percent",
            "--mini_batch_error_threshold": "mini_batch_error_threshold", "--run_invocation_timeout": "timeout",
            "--process_count_per_node": "max_concurrency_per_instance",
            "--append_row_file_name": "append_row_file_name"}
#: Those that tune Azure's own service (its agents' timeouts, log copying, monitors): accepted, said once.
SERVICE_ONLY = ("--task_overhead_timeout", "--progress_update_timeout", "--first_task_creation_timeout",
                "--resource_monitor_interval", "--copy_logs_to_parent", "--enable_node_profiling",
                "--logging_level", "--run_max_try", "--save_mini_batch_results", "--partition_keys")


@dataclasses.dataclass
class ParallelJob:
    command: command_job.CommandJob   # its code, environment, compute, inputs and outputs, read as a command's
    fields: Dict[str, Any]            # the job=parallel fields that are not expressions
    input_data: str                   # as written, expressions unresolved
    arguments: str
    append_row_to: str


def parse(jf: JobFile, where: Sequence[Any], data: Dict[str, Any], ctx: command_job.Context,
          inherited: Dict[str, Any]) -> ParallelJob:
    where = tuple(where)
    data = check_fields(jf, where, data, PARALLEL)
    task = check_fields(jf, where + ("task",), data.get("task"), TASK)
    kind = task.get("type", "run_function")
    if kind != "run_function":
        raise jf.error(where + ("task", "type"), f"'{kind}' tasks run only in Azure ML (model or function "
                                                 "tasks of its own service); mltrain runs run_function tasks")
    if data.get("component") is not None:  # a parallel component (azure-ai-ml's parallel_run_function writes one)
        data = _with_component(jf, where, data)
    entry = text(jf, where + ("task", "entry_script"), task.get("entry_script"))
    if "input_data" not in data:
        raise jf.error(where + ("input_data",), "a parallel job needs `input_data` (${{inputs.NAME}})")
    arguments = str(task.get("program_arguments") or "")
    # Read as a command whose text holds every expression, so the inputs, outputs and references are checked
    # as a command job's are.
    body = {k: v for k, v in data.items() if k in ("compute", "inputs", "outputs", "environment_variables",
                                                   "resources", "name", "display_name", "description", "tags")}
    body.update(command=" ".join(str(x) for x in (arguments, data["input_data"], task.get("append_row_to") or "")),
                code=task.get("code"), environment=task.get("environment"))
    job = command_job.parse(jf, where, body, ctx, known=COMMAND, inherited=inherited)
    retry = check_fields(jf, where + ("retry_settings",), data.get("retry_settings"), RETRY)
    fields: Dict[str, Any] = {"entry_script": entry}
    for key, low in (("max_concurrency_per_instance", 1), ("mini_batch_error_threshold", -1),
                     ("error_threshold", -1)):
        if data.get(key) is not None:
            fields[key] = number(jf, where + (key,), data[key], True, low)
    if retry.get("max_retries") is not None:
        fields["max_retries"] = number(jf, where + ("retry_settings", "max_retries"), retry["max_retries"], True, 0)
    if retry.get("timeout") is not None:
        fields["timeout"] = number(jf, where + ("retry_settings", "timeout"), retry["timeout"], False, 1)
    # azure-ai-ml writes 0 for a job that gives none (its partition_keys cut the input): the default, then
    if data.get("mini_batch_size") not in (None, 0, "0", ""):
        fields["mini_batch_size"] = str(data["mini_batch_size"])
    if data.get("logging_level") is not None:
        fields["logging_level"] = one_of(jf, where + ("logging_level",), str(data["logging_level"]).upper(), LOGGING)
    if data.get("output_action") is not None:
        fields["output_action"] = one_of(jf, where + ("output_action",), data["output_action"],
                                         ("append_row", "summary_only"))
    if data.get("partition_keys") is not None:
        keys = data["partition_keys"]
        fields["partition_keys"] = [str(k) for k in (keys if isinstance(keys, list) else str(keys).split(","))]
    return ParallelJob(job, fields, str(data["input_data"]), arguments, str(task.get("append_row_to") or ""))


def _with_component(jf: JobFile, where: tuple, node: Dict[str, Any]) -> Dict[str, Any]:
    """A node of a parallel component: the component's fields, the node's over them, its ports bound to the
    node's inputs and outputs (a data port keeps the component's type: mltable is read as a table)."""
    if isinstance(node["component"], dict):  # inline, as Azure's pipeline files allow (azure-ai-ml's, in memory)
        ref, spec, flow_file = "the inline component", dict(node["component"]), False
    else:
        ref = str(node["component"])
        path = Path(jf.folder) / (ref[len("file:"):] if ref.startswith("file:") else ref)
        if not path.is_file():
            raise jf.error(where + ("component",), f"component file '{ref}' does not exist (relative to {jf.folder})")
        comp = load(str(path))
        spec, flow_file = (comp.data if isinstance(comp.data, dict) else {}), path.name.startswith("flow.dag")
    if "nodes" in spec or "flow" in spec or flow_file:
        raise jf.error(where + ("component",), f"'{ref}' is a prompt flow: flows run only in Azure ML's prompt flow "
                                               "runtime; mltrain runs parallel components with a run_function task")
    if spec.get("type", "parallel") != "parallel" or not isinstance(spec.get("task"), dict):
        raise jf.error(where + ("component",), f"'{ref}' is not a parallel component with a task (type: parallel, "
                                               "task: {type: run_function, ...})")
    merged = {k: v for k, v in spec.items() if k not in COMPONENT_ONLY}
    merged.update({k: v for k, v in node.items() if k not in ("component", "inputs", "outputs")})
    given_in, given_out = node.get("inputs") or {}, node.get("outputs") or {}
    inputs: Dict[str, Any] = {}
    for port, decl in (spec.get("inputs") or {}).items():
        decl = decl if isinstance(decl, dict) else {"type": "string", "default": decl}
        value = given_in.get(port, decl.get("default"))
        if value is None:
            continue  # an optional port nobody gave
        kind = decl.get("type")
        inputs[port] = {"type": kind, "path": value} if kind in PATH_TYPES and isinstance(value, str) else value
    outputs: Dict[str, Any] = {}
    for port, decl in (spec.get("outputs") or {}).items():
        decl = decl if isinstance(decl, dict) else {}
        outputs[port] = given_out.get(port, {"type": decl.get("type", "uri_folder")})
    merged["inputs"], merged["outputs"] = inputs, outputs
    return merged


def _render(job: ParallelJob, text_: str, output_path: Any, input_path: Any, name: str) -> str:
    if not text_:
        return ""
    one = dataclasses.replace(job.command, command=text_)
    return command_job.render_command(one, output_path, input_path, lambda n: f"$AML_PARAMETER_{n}", name)


def input_format(job: ParallelJob) -> str:
    """Azure reads a uri_folder or uri_file input as files; an mltable as its MLTable file says: a table
    (DataFrames) under a read_delimited or read_parquet transformation, files without one."""
    ref = job.input_data.strip()
    for inp in job.command.inputs.values():
        if ref == f"${{{{inputs.{inp.name}}}}}":
            return "auto" if inp.type == "mltable" else "files"
    return "auto"


def config_values(job: ParallelJob, output_path: Any, input_path: Any, name: str, empty_code: str
                  ) -> Tuple[Dict[str, Any], List[str]]:
    """The mltrain config values of this job (`job`, `environment`, `distribution`, data), and its notes."""
    notes: List[str] = []
    arguments = shlex.split(_render(job, job.arguments, output_path, input_path, name))
    fields = dict(job.fields)
    for index, arg in enumerate(arguments):
        flag, _, inline = arg.partition("=")
        value = inline or (arguments[index + 1] if index + 1 < len(arguments) else "")
        if flag in HONOURED and HONOURED[flag] not in fields:
            fields[HONOURED[flag]] = _scalar(value)
        elif flag in SERVICE_ONLY:
            notes.append(f"program_arguments {flag}: tunes Azure's parallel service; accepted, not used here")
    data = shlex.split(_render(job, job.input_data, output_path, input_path, name))
    append = shlex.split(_render(job, job.append_row_to, output_path, input_path, name))
    target = append[0] if append else None
    if target is not None and _is_file_output(job):  # a uri_file output is the file itself
        fields.setdefault("append_row_file_name", posixpath.basename(target))
        target = posixpath.dirname(target)
    values = command_job.config_values(job.command, "", empty_code)
    values["job"] = {"source_directory": values["job"]["source_directory"], **fields, "program_arguments": arguments,
                     "input_data": data[0] if data else "", "input_format": input_format(job),
                     "append_row_to": target,
                     "output_dirs": [output_path(o) for o in job.command.outputs.values() if o.type != "uri_file"]}
    values["distribution"] = {"node_count": job.command.distribution.get("node_count", 1), "process_count_per_node": 1}
    return values, notes


def _is_file_output(job: ParallelJob) -> bool:
    ref = job.append_row_to.strip()
    return any(ref == f"${{{{outputs.{o.name}}}}}" and o.type == "uri_file" for o in job.command.outputs.values())


def _scalar(value: str) -> Any:
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def groups(job: ParallelJob) -> List[str]:
    out = ["job=parallel", f"environment={job.command.environment.option}", "distribution=none"]
    if job.command.compute is not None:
        out.append(f"compute={job.command.compute}")
    return out
