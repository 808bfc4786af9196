"""What `mltrain job create` was asked (Request) and what it runs (Plan): shared by the command and
sweep mapping (mltrain.azureml.job_plan) and the pipeline mapping (mltrain.azureml.pipeline_job)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from mltrain.azureml import v2_schema
from mltrain.azureml.yaml_lines import JobFile

#: The config group of the generated files (`+azureml_job=NAME`), one `_global_` file per job or step.
GROUP = "azureml_job"
#: A job without `code` runs in an empty folder (made next to the generated files).
EMPTY_CODE = "empty_code"


@dataclass(frozen=True)
class Request:
    file: str
    sets: Sequence[str] = ()
    name: Optional[str] = None
    experiment_name: Optional[str] = None
    overrides: Sequence[str] = ()                           # mltrain overrides after the file
    dry_run: bool = False


@dataclass
class Plan:
    kind: str                                                # command | sweep | pipeline
    overrides: List[str]                                     # mltrain's, before the user's own
    files: Dict[str, Dict[str, Any]] = field(default_factory=dict)   # generated config files by relative path
    notes: List[str] = field(default_factory=list)           # said once
    lines: List[str] = field(default_factory=list)           # the plan as the dry run prints it
    config_dirs: List[str] = field(default_factory=list)     # the repository's `.mltrain` folders, searched first


def record(jf: JobFile, kind: str) -> Dict[str, Any]:
    data = jf.data
    out: Dict[str, Any] = {"file": jf.path, "type": kind}
    for key in ("name", "display_name", "description", "tags"):
        if data.get(key) is not None:
            out[key] = data[key]
    ignored = v2_schema.azure_only(data)
    if ignored:
        out["ignored"] = ignored
    return out


def ignored_note(jf: JobFile) -> List[str]:
    ignored = v2_schema.azure_only(jf.data)
    if not ignored:
        return []
    return [f"{', '.join(ignored)}: Azure-only, recorded with the run and ignored here"]


def file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)
