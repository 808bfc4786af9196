"""A job's `inputs` and `outputs` as Azure writes them (reference-yaml-job-command, "Job inputs" and
"Job outputs"): a literal (string, integer, number, boolean), a data input `{type, path, mode}`, a
binding `${{parent...}}` inside a pipeline; an output `{type, path, mode}` or nothing (a folder of the run).

An output of a primitive type (`{type: string}`, mldesigner's `-> str`, `Output(type="boolean",
is_control=True)`) is a value, not data: the job writes it as text to the file `${{outputs.x}}` names
(VALUE_FILE in the output's folder, where mldesigner's `execute` writes a function's return value), and
a later pipeline step reads it as the value of a primitive input (mltrain.azureml.pipeline_job).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from mltrain.azureml import expressions, references
from mltrain.azureml.v2_schema import (
    INPUT_KEYS,
    INPUT_MODES,
    LITERAL_TYPES,
    OUTPUT_KEYS,
    OUTPUT_MODES,
    PATH_TYPES,
    check_fields,
    one_of,
)
from mltrain.azureml.yaml_lines import JobFile

#: The file in a primitive output's folder that holds its value (mldesigner writes `<folder>/output`).
VALUE_FILE = "output"


@dataclass
class Input:
    name: str
    type: str                       # string | integer | number | boolean | uri_file | uri_folder | ...
    value: Any = None               # a literal's value
    path: Optional[str] = None      # a data input's local file or folder (absolute)
    mode: Optional[str] = None      # Azure's ro_mount, download, ...: recorded; the local path is read in place
    binding: Optional[str] = None   # `parent.inputs.x` / `parent.jobs.a.outputs.y` (pipeline steps)
    url: Optional[str] = None       # the web address `path` is downloaded from (not yet, in a dry run)

    @property
    def is_data(self) -> bool:
        return self.type in PATH_TYPES


@dataclass
class Output:
    name: str
    type: str = "uri_folder"
    path: Optional[str] = None      # an explicit local path; None: a folder of the run
    mode: Optional[str] = None
    binding: Optional[str] = None   # `parent.outputs.z` (pipeline steps)
    # A pipeline output's own folder that also shows this step output (a link made when the step starts)
    link: Optional[str] = None

    @property
    def is_value(self) -> bool:
        """A primitive output (string, integer, number, boolean): a value written to VALUE_FILE."""
        return self.type in LITERAL_TYPES


def literal_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


def parse_inputs(jf: JobFile, path: Sequence[Any], node: Any, dry_run: bool, in_pipeline: bool = False
                 ) -> Dict[str, Input]:
    path = tuple(path)
    out: Dict[str, Input] = {}
    for name, value in (node or {}).items() if isinstance(node, dict) else _not_mapping(jf, path, node):
        where = path + (name,)
        if not str(name).isidentifier():
            raise jf.error(where, "an input name takes letters, digits and _ (it becomes AZURE_ML_INPUT_<name>)")
        bound = expressions.binding(value)
        if bound is not None:
            if not in_pipeline:
                raise jf.error(where, "${{parent...}} binds a step's input inside a pipeline job only")
            out[name] = Input(name, "binding", binding=bound)
            continue
        if not isinstance(value, dict):
            if isinstance(value, (list, type(None))):
                raise jf.error(where, "an input is a literal (string, integer, number, boolean) or "
                                      "{type, path, mode}")
            out[name] = Input(name, literal_type(value), value=value)
            continue
        spec = check_fields(jf, where, value, INPUT_KEYS)
        kind = one_of(jf, where + ("type",), spec.get("type", "uri_folder"), LITERAL_TYPES + PATH_TYPES)
        if kind in LITERAL_TYPES and not in_pipeline:
            # Azure's loader takes a job's literal input only as its value; {type, default} is a component's port
            raise jf.error(where + ("type",), f"'{kind}' in this form is a component's input; a job's literal input "
                                              f"is written as its value ({name}: VALUE)")
        if kind in LITERAL_TYPES:
            out[name] = Input(name, kind, value=spec.get("value", spec.get("default")))
            continue
        mode = spec.get("mode")
        if mode is not None:
            one_of(jf, where + ("mode",), mode, INPUT_MODES)
        if "path" not in spec:
            raise jf.error(where, f"a {kind} input needs `path`")
        bound = expressions.binding(spec["path"])
        if bound is not None and in_pipeline:
            out[name] = Input(name, kind, binding=bound, mode=mode)
            continue
        local, url = references.data_input(jf, where + ("path",), spec["path"], dry_run)
        out[name] = Input(name, kind, path=local, mode=mode, url=url)
    return out


def parse_outputs(jf: JobFile, path: Sequence[Any], node: Any, dry_run: bool, job_name: str,
                  in_pipeline: bool = False) -> Dict[str, Output]:
    path = tuple(path)
    out: Dict[str, Output] = {}
    for name, value in (node or {}).items() if isinstance(node, dict) else _not_mapping(jf, path, node):
        where = path + (name,)
        if not str(name).isidentifier():
            raise jf.error(where, "an output name takes letters, digits and _ (it becomes AZURE_ML_OUTPUT_<name>)")
        bound = expressions.binding(value)
        if bound is not None:
            if not in_pipeline:
                raise jf.error(where, "${{parent...}} binds a step's output inside a pipeline job only")
            out[name] = Output(name, binding=bound)
            continue
        spec = check_fields(jf, where, value, OUTPUT_KEYS)
        kind = one_of(jf, where + ("type",), spec.get("type", "uri_folder"), PATH_TYPES + LITERAL_TYPES)
        if kind in LITERAL_TYPES and spec.get("path") is not None:
            raise jf.error(where + ("path",), f"a {kind} output is a value the job writes, not data: it has no path")
        mode = spec.get("mode")
        if mode is not None:
            one_of(jf, where + ("mode",), mode, OUTPUT_MODES)
        local = None
        if spec.get("path") is not None:
            # Azure fills ${{name}} in an output path with the job's name.
            raw = str(spec["path"]).replace("${{name}}", job_name)
            local = _output_path(jf, where + ("path",), raw)
        out[name] = Output(name, kind, path=local, mode=mode)
    return out


def _output_path(jf: JobFile, where: tuple, raw: str) -> str:

    if "://" in raw and not raw.startswith("file://"):
        local = references.datastore_folder(raw, references.config_dirs(jf))
        if local is None:
            raise jf.error(where, f"'{raw}' has no local folder: map a prefix of it in .mltrain/"
                                  f"{references.DATASTORES_FILE} (only the workspace's default datastore, "
                                  f"{references.DEFAULT_DATASTORE}, has one without)")
        return local
    raw = raw[len("file://"):] if raw.startswith("file://") else raw
    return str((Path(jf.folder) / os.path.expanduser(raw)).resolve())


def _not_mapping(jf: JobFile, path: tuple, node: Any):
    if node is None:
        return []
    raise jf.error(path, "expected a mapping of names")
