"""Azure ML's v2 YAML schemas (commandJob, sweepJob, pipelineJob, commandComponent) as field tables,
and the checks Azure's CLI makes before it creates a job: an unknown field (with the nearest known
one), a value outside an enumeration, a wrong type, a missing required field.

Field names and meanings follow Azure's published references (reference-yaml-job-command,
-job-sweep, -job-pipeline, -component-command). Only the shape is checked here; what a value refers
to (an environment, a compute, a data asset) is resolved in mltrain.azureml.references.
"""
from __future__ import annotations

import difflib
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from mltrain.azureml.yaml_lines import JobFile

#: Fields every job type shares (Azure's "common job" keys).
COMMON = ("$schema", "type", "name", "display_name", "description", "tags", "properties", "experiment_name",
          "compute", "inputs", "outputs", "identity", "services", "status", "creation_context", "id",
          "notification_setting")
#: A command job or an inline command step.
COMMAND = COMMON + ("command", "code", "environment", "environment_variables", "distribution", "resources",
                    "limits", "queue_settings", "parameters")
SWEEP = COMMON + ("trial", "search_space", "sampling_algorithm", "objective", "early_termination", "limits",
                  "queue_settings", "resources")
PIPELINE = COMMON + ("jobs", "settings")
#: A command component file (reference-yaml-component-command).
COMPONENT = ("$schema", "type", "name", "version", "display_name", "description", "tags", "is_deterministic",
             "inputs", "outputs", "command", "code", "environment", "distribution", "resources",
             "additional_includes", "instance_count")
#: A step of a pipeline's `jobs`: a command job's fields, or a component with bindings.
STEP = COMMAND + ("component", "trial", "search_space", "sampling_algorithm", "objective", "early_termination",
                  # a parallel node's (reference-yaml-job-parallel; mltrain.azureml.parallel_job checks them)
                  "task", "input_data", "mini_batch_size", "max_concurrency_per_instance", "mini_batch_error_threshold",
                  "error_threshold", "logging_level", "retry_settings", "partition_keys", "output_action",
                  "is_deterministic")

SETTINGS = ("default_compute", "default_datastore", "continue_on_step_failure", "force_rerun", "default_environment",
            "on_init", "on_finalize", "default_datastore")
RESOURCES = ("instance_count", "instance_type", "properties", "shm_size", "docker_args", "locations",
             "max_instance_count")
LIMITS_COMMAND = ("timeout",)
LIMITS_SWEEP = ("max_total_trials", "max_concurrent_trials", "timeout", "trial_timeout")
OBJECTIVE = ("goal", "primary_metric")
GOALS = ("maximize", "minimize")

#: Job types mltrain runs, and those it knows but leaves to Azure (each refused in one line).
RUNS = ("command", "sweep", "pipeline", "parallel")
AZURE_ONLY_TYPES = {
    "automl": "AutoML jobs search models with Azure's own AutoML service",
    "spark": "Spark jobs need Azure's serverless Spark or an attached Synapse pool",
    "data_transfer": "data transfer jobs copy between Azure stores and databases",
    "import": "import jobs pull from external databases into an Azure datastore",
}

#: Input and output types (reference-yaml-job-command, "Job inputs" / "Job outputs").
LITERAL_TYPES = ("string", "integer", "number", "boolean")
PATH_TYPES = ("uri_file", "uri_folder", "mlflow_model", "custom_model", "mltable", "triton_model")
INPUT_KEYS = ("type", "path", "mode", "default", "optional", "description", "enum", "min", "max", "value",
              "datastore", "path_on_compute")
OUTPUT_KEYS = ("type", "path", "mode", "description", "name", "version", "datastore", "path_on_compute", "is_control")
#: As Azure's loader takes them: an input is never mounted writable; an output may be `mount` (its old name).
INPUT_MODES = ("ro_mount", "download", "direct", "eval_mount", "eval_download")
OUTPUT_MODES = ("rw_mount", "mount", "upload", "direct")

#: Azure's fields that have no meaning outside Azure: accepted, recorded, ignored (said once).
AZURE_ONLY_FIELDS = ("identity", "services", "queue_settings", "resources.instance_type", "resources.properties",
                     "resources.shm_size", "resources.docker_args", "resources.locations", "notification_setting",
                     "properties", "status", "creation_context", "id", "resources.max_instance_count")

DISTRIBUTIONS = {"pytorch": ("type", "process_count_per_instance"),
                 "mpi": ("type", "process_count_per_instance"),
                 "tensorflow": ("type", "worker_count", "parameter_server_count"),
                 "ray": ("type",)}

#: Sweep parameter expressions (reference-yaml-job-sweep, "Parameter expressions"): type -> fields.
SEARCH_TYPES: Dict[str, Tuple[str, ...]] = {
    "choice": ("values",),
    "randint": ("upper",),
    "uniform": ("min_value", "max_value"),
    "quniform": ("min_value", "max_value", "q"),
    "loguniform": ("min_value", "max_value"),
    "qloguniform": ("min_value", "max_value", "q"),
    "normal": ("mu", "sigma"),
    "qnormal": ("mu", "sigma", "q"),
    "lognormal": ("mu", "sigma"),
    "qlognormal": ("mu", "sigma", "q"),
}
SAMPLINGS = ("random", "grid", "bayesian")
SAMPLING_KEYS = {"random": ("type", "seed", "rule", "logbase"), "grid": ("type",), "bayesian": ("type",)}
RANDOM_RULES = ("random", "sobol")
POLICY_KEYS = {
    "bandit": ("type", "evaluation_interval", "delay_evaluation", "slack_factor", "slack_amount"),
    "median_stopping": ("type", "evaluation_interval", "delay_evaluation"),
    # Azure's loader has no exclude_finished_jobs here (only its v1 SDK's policy does)
    "truncation_selection": ("type", "evaluation_interval", "delay_evaluation", "truncation_percentage"),
}


def nearest(name: str, known: Iterable[str]) -> Optional[str]:
    close = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    return close[0] if close else None


def check_fields(jf: JobFile, path: Sequence[Any], node: Any, known: Sequence[str]) -> Dict[str, Any]:
    """`node` must be a mapping of known fields; returns it. An unknown one names the nearest."""
    mapping = require_mapping(jf, path, node)
    for key in mapping:
        if key not in known:
            close = nearest(key, known)
            hint = f" (did you mean {close}?)" if close else f" (known: {', '.join(k for k in known if k[0] != '$')})"
            raise jf.error(tuple(path) + (key,), f"unknown field{hint}")
    return mapping


def require_mapping(jf: JobFile, path: Sequence[Any], node: Any) -> Dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, Mapping):
        raise jf.error(tuple(path), f"expected a mapping of fields, got {_shown(node)}")
    return dict(node)


def one_of(jf: JobFile, path: Sequence[Any], value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise jf.error(tuple(path), f"{_shown(value)} is not one of {', '.join(allowed)}")
    return str(value)


def number(jf: JobFile, path: Sequence[Any], value: Any, integer: bool = False, low: Optional[float] = None) -> Any:
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        raise jf.error(tuple(path), f"{_shown(value)} is not {'an integer' if integer else 'a number'}")
    if low is not None and value < low:
        raise jf.error(tuple(path), f"{value} is invalid; must be >= {low:g}")
    return value


def text(jf: JobFile, path: Sequence[Any], value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise jf.error(tuple(path), f"expected a non-empty string, got {_shown(value)}")
    return value


def job_type(jf: JobFile, data: Mapping[str, Any], default: str = "command", where: Sequence[Any] = ()) -> str:
    """The job's `type` (a top-level job's, or a pipeline node's at `where`), or one line saying why
    mltrain does not run it."""
    kind = data.get("type", default)
    refuse_azure_only(jf, where, kind)
    return one_of(jf, tuple(where) + ("type",), kind, RUNS)


def refuse_azure_only(jf: JobFile, where: Sequence[Any], kind: Any) -> None:
    """The same line for an Azure-only type at the top and as a pipeline node (checked before the
    node's fields, which are that type's and would otherwise read as unknown fields of a command)."""
    if isinstance(kind, str) and kind in AZURE_ONLY_TYPES:
        raise jf.error(tuple(where) + ("type",), f"'{kind}' jobs run only in Azure ML: {AZURE_ONLY_TYPES[kind]}; "
                                                 f"mltrain runs {', '.join(RUNS)} jobs")


def azure_only(data: Mapping[str, Any]) -> Dict[str, Any]:
    """The Azure-only fields present in a job (dotted name -> value), to record and mention once."""
    found: Dict[str, Any] = {}
    for name in AZURE_ONLY_FIELDS:
        node: Any = data
        for part in name.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if node is not None:
            found[name] = node
    return found


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)
