"""A command job (reference-yaml-job-command), a sweep's trial or a pipeline's command step, read
into a CommandJob and mapped onto mltrain's `job=command`: the command with its expressions filled
in, the `code` folder as the snapshot the command runs in, the environment, distribution and compute
as mltrain's groups.

Where a path is not known when the file is read, the command names it through the rank's own
environment: a run's outputs folder is `$MLTRAIN_OUTPUTS_DIR` in every rank (each sweep trial has its
own), and `${outputs.NAME}` / `${inputs.NAME}` are filled in by the pipeline engine for its steps.
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from mltrain.azureml import expressions, references
from mltrain.azureml.job_io import VALUE_FILE, Input, Output, parse_inputs, parse_outputs
from mltrain.azureml.v2_schema import (
    COMMAND,
    DISTRIBUTIONS,
    LIMITS_COMMAND,
    RESOURCES,
    check_fields,
    number,
    one_of,
    text,
)
from mltrain.azureml.yaml_lines import JobFile
from mltrain.jobspec.computes import DEFAULT_COMPUTE


@dataclass
class CommandJob:
    file: JobFile
    where: tuple                                    # the job's field path in its file (() at the top)
    command: str                                    # as written, expressions unresolved
    code: Optional[str]                             # absolute folder, or None (an empty working folder)
    environment: references.Environment
    environment_variables: Dict[str, str]
    compute: Optional[str]                          # a `compute=` option; None: local
    distribution: Dict[str, Any]                    # mltrain's distribution: kind, node_count, process_count_per_node
    timeout_s: Optional[int]
    inputs: Dict[str, Input] = field(default_factory=dict)
    outputs: Dict[str, Output] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)
    version: Optional[str] = None                   # a component's `version` (part of a step's reuse key)
    deterministic: bool = True                      # a component's `is_deterministic` (step reuse)


@dataclass(frozen=True)
class Context:
    """What reading a job depends on besides its file."""

    dry_run: bool = False
    on_cluster: bool = False          # a compute override chose a cluster (images may run there)
    job_name: str = "job"             # Azure's ${{name}}
    in_pipeline: bool = False


def parse(jf: JobFile, where: Sequence[Any], data: Dict[str, Any], ctx: Context,
          known: Sequence[str] = COMMAND, inherited: Optional[Dict[str, Any]] = None,
          check_refs: bool = True) -> CommandJob:
    """A command job's fields (also a trial's or a step's, whose extra fields the caller allows)."""
    where = tuple(where)
    data = check_fields(jf, where, data, known)
    inherited = inherited or {}
    if "command" not in data:
        raise jf.error(where + ("command",), "a command job needs `command`")
    command = text(jf, where + ("command",), data["command"])
    code = None
    if data.get("code") is not None:
        code = _code(jf, where + ("code",), data["code"])
    compute = references.compute(jf, where + ("compute",), data.get("compute", inherited.get("compute")))
    on_cluster = ctx.on_cluster or compute not in (None, DEFAULT_COMPUTE)
    env = references.environment(jf, where + ("environment",), data.get("environment"), on_cluster)
    variables = {str(k): str(v) for k, v in (data.get("environment_variables") or {}).items()}
    resources = check_fields(jf, where + ("resources",), data.get("resources"), RESOURCES)
    nodes = 1
    if resources.get("instance_count") is not None:
        nodes = number(jf, where + ("resources", "instance_count"), resources["instance_count"], True, 1)
    distribution = _distribution(jf, where + ("distribution",), data.get("distribution"), nodes)
    limits = check_fields(jf, where + ("limits",), data.get("limits"), LIMITS_COMMAND)
    timeout = None
    if limits.get("timeout") is not None:
        timeout = number(jf, where + ("limits", "timeout"), limits["timeout"], True, 1)
    inputs = parse_inputs(jf, where + ("inputs",), data.get("inputs"), ctx.dry_run, ctx.in_pipeline)
    outputs = parse_outputs(jf, where + ("outputs",), data.get("outputs"), ctx.dry_run, ctx.job_name, ctx.in_pipeline)
    job = CommandJob(jf, where, command, code, env, variables, compute, distribution, timeout, inputs, outputs,
                     list(env.notes))
    if check_refs:
        check_references(job)
    return job


def _code(jf: JobFile, where: tuple, value: Any) -> str:

    raw = str(value)
    if raw.startswith(("azureml:", "git+", "https://", "http://")):
        raise jf.error(where, f"code '{raw}' is a remote snapshot; mltrain runs a local folder (clone it and name "
                              "the folder)")
    folder = (Path(jf.folder) / raw).resolve()
    if not folder.exists():
        raise jf.error(where, f"code folder '{raw}' does not exist (relative to {jf.folder})")
    if folder.is_file():  # Azure accepts a single file as the snapshot; its folder is what runs
        return str(folder.parent)
    return str(folder)


def _distribution(jf: JobFile, where: tuple, node: Any, nodes: int) -> Dict[str, Any]:
    """Azure's distribution on instance_count nodes, as mltrain's rank contract (the same RANK,
    WORLD_SIZE, MASTER_ADDR/PORT every framework reads)."""
    if node is None:
        # Azure runs the command once per instance; mltrain does so as one rank per node.
        return {"kind": "pytorch" if nodes > 1 else "none", "node_count": nodes, "process_count_per_node": 1}
    spec = check_fields(jf, where, node, ("type", "process_count_per_instance", "worker_count",
                                          "parameter_server_count"))
    kind = one_of(jf, where + ("type",), spec.get("type"), tuple(DISTRIBUTIONS))
    check_fields(jf, where, spec, DISTRIBUTIONS[kind])
    if kind == "ray":
        raise jf.error(where + ("type",), "Ray jobs need a Ray cluster, which mltrain does not start")
    if kind == "tensorflow":
        if spec.get("parameter_server_count"):
            raise jf.error(where + ("parameter_server_count",), "parameter servers are not supported: mltrain "
                                                                "starts workers only (MultiWorkerMirroredStrategy)")
        workers = number(jf, where + ("worker_count",), spec.get("worker_count", nodes), True, 1)
        if workers % nodes:
            raise jf.error(where + ("worker_count",), f"{workers} workers do not split evenly over {nodes} instances")
        # the workers are mltrain's ranks; each also gets TF_CONFIG, as Azure sets it
        return {"kind": "pytorch", "node_count": nodes,
                "process_count_per_node": workers // nodes, "tf_config": True}
    per = number(jf, where + ("process_count_per_instance",), spec.get("process_count_per_instance", 1), True, 1)
    return {"kind": kind, "node_count": nodes, "process_count_per_node": per}


def check_references(job: CommandJob, allowed_roots: Sequence[str] = ("inputs", "outputs", "name", "search_space")
                     ) -> None:
    """Every `${{...}}` of the command names something the job has (Azure refuses the file otherwise);
    inside an optional block `$[[...]]` an input that is not given only drops the block."""
    optional = {r for block in expressions.OPTIONAL.findall(job.command) for r in expressions.references(block)}
    for ref in expressions.references(job.command):
        if ref in optional and ref.startswith("inputs."):
            continue
        root, _, rest = ref.partition(".")
        if root not in allowed_roots:
            raise job.file.error(job.where + ("command",), f"${{{{{ref}}}}} is not an expression Azure knows "
                                                           "(inputs.X, outputs.X, search_space.X, name)")
        if root == "inputs" and rest not in job.inputs:
            raise job.file.error(job.where + ("command",), f"${{{{{ref}}}}}: no input '{rest}' "
                                                           f"(inputs: {', '.join(job.inputs) or 'none'})")
        if root == "outputs" and rest not in job.outputs:
            raise job.file.error(job.where + ("command",), f"${{{{{ref}}}}}: no output '{rest}' "
                                                           f"(outputs: {', '.join(job.outputs) or 'none'})")


# ------------------------------------------------------------------------------------ mapping


def literal_text(value: Any) -> str:
    """A literal as Azure writes it into a command: booleans as True/False (Python's spelling)."""
    return str(value)


def render_command(job: CommandJob, output_path: Callable[[Output], str], input_path: Callable[[Input], str],
                   search_space: Callable[[str], str], job_name: str) -> str:
    """The command line with every expression filled in, shell-safe for mltrain's config."""
    where = job.where + ("command",)

    def resolve(ref: str) -> Optional[str]:
        root, _, rest = ref.partition(".")
        if root == "name":
            return job_name
        if root == "search_space":
            return search_space(rest)
        if root == "inputs":
            inp = job.inputs.get(rest)
            if inp is None:  # named only inside an optional block, and not given
                return None
            if inp.binding is None and inp.path is None and inp.value is None:
                return None  # an optional input nobody gave
            if inp.is_data or inp.binding is not None:
                return input_path(inp)
            return literal_text(inp.value)
        return output_path(job.outputs[rest])

    try:
        return expressions.render(expressions.shell_safe(job.command), resolve)
    except expressions.UnknownReference as exc:
        raise job.file.error(where, str(exc)) from None


def prologue(job: CommandJob, standalone_outputs: bool) -> str:
    """Shell lines before the command: each output folder made and named as Azure names it
    (AZURE_ML_OUTPUT_<name>), as Azure mounts them before the command starts."""
    lines: List[str] = []
    for out in job.outputs.values():
        if out.link is not None:  # the pipeline output's path shows the step's folder (unless a real folder is there)
            link = shlex.quote(out.link)
            lines.append(f'mkdir -p "$(dirname {link})"; if [ -L {link} ] || [ ! -e {link} ]; then '
                         f'ln -sfn "$AZURE_ML_OUTPUT_{out.name}" {link}; fi')
        if out.path is not None:
            target = shlex.quote(out.path)
        elif standalone_outputs:
            target = f'"$MLTRAIN_OUTPUTS_DIR/{out.name}{"/" + VALUE_FILE if out.is_value else ""}"'
        elif out.is_value:  # its folder is the engine's; the variable names the file the value is written to
            lines.append(f'export AZURE_ML_OUTPUT_{out.name}="${{outputs.{out.name}}}/{VALUE_FILE}"')
            continue
        else:
            continue  # a pipeline step's output folder is made by the pipeline engine
        folder = f'"$(dirname {target})"' if out.type == "uri_file" or out.is_value else target
        lines.append(f"export AZURE_ML_OUTPUT_{out.name}={target}; mkdir -p {folder}")
    return "; ".join(lines)


#: A command that runs pip (`pip install`, `pip3 ...`, `python -m pip ...`).
RUNS_PIP = re.compile(r"(?:^|[\s;&|(])(?:pip3?|\S*python3?\s+-m\s+pip)(?:\s|$)")
#: Before such a command: a package layer of the job's own first on PATH (mltrain.azureml.pip_layer).
PIP_LAYER = ('PATH="$("$MLTRAIN_PYTHON" -m mltrain.azureml.pip_layer "$(command -v python || command -v python3)")'
             '/bin:$PATH"; export PATH')


def wrap(job: CommandJob, body: str, pre: str) -> str:
    """The command as one `sh -c` line: the prologue, then the body; under `timeout` when
    limits.timeout is set (Azure cancels the job at that many seconds). A command that runs pip gets a
    package layer of its own first, so `pip install` never changes an environment other runs share."""
    if RUNS_PIP.search(body):
        pre = f"{pre}; {PIP_LAYER}" if pre else PIP_LAYER
    if job.timeout_s is not None:
        body = f"exec timeout --signal=TERM --kill-after=10 {job.timeout_s} /bin/sh -c {shlex.quote(body)}"
    return f"{pre}; {body}" if pre else body


def config_values(job: CommandJob, command: str, empty_code: str) -> Dict[str, Any]:
    """The mltrain config values of this job (the `job`, `environment`, `distribution` and data nodes)."""
    values: Dict[str, Any] = {
        "job": {"source_directory": job.code or empty_code, "command": command},
        "distribution": {k: v for k, v in job.distribution.items() if k != "kind"},
        "inputs": {i.name: i.path for i in job.inputs.values() if i.path is not None},
    }
    env = dict(job.environment.values)
    if job.environment_variables:
        env["environment_variables"] = dict(job.environment_variables)
    if env:
        values["environment"] = env
    return values


def groups(job: CommandJob) -> List[str]:
    """The config group choices: `job=command`, the environment, the distribution and the compute."""
    out = ["job=command", f"environment={job.environment.option}", f"distribution={job.distribution['kind']}"]
    if job.compute is not None:
        out.append(f"compute={job.compute}")
    return out


def minutes(seconds: Optional[float]) -> Optional[float]:
    return None if seconds is None else math.ceil(float(seconds) / 60.0 * 100) / 100
