"""What `mltrain job create` was asked (JobCreate) and what it plans (Plan): shared by the command and
sweep mapping (mltrain.azureml.job_plan) and the pipeline mapping (mltrain.azureml.pipeline_job)."""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from mltrain.azureml import v2_schema
from mltrain.azureml.yaml_lines import JobFile
from mltrain.config.memory_nodes import ConfigNode

#: The config group of the generated files (`+azureml_job=NAME`), one `_global_` file per job or step.
GROUP = "azureml_job"
#: A job without `code` runs in an empty folder (`empty_code`, one folder under MLTRAIN_HOME).
EMPTY_CODE = "empty_code"


@dataclass(frozen=True)
class JobCreate:
    """The arguments of `mltrain job create` (or an SDK's submission of an entity, dumped): a v2 job file to
    plan. The plan becomes the command's typed request (mltrain.launch.request.Request)."""

    file: str
    sets: Sequence[str] = ()
    name: Optional[str] = None
    experiment_name: Optional[str] = None
    overrides: Sequence[str] = ()                           # mltrain overrides after the file
    dry_run: bool = False
    #: the file's fields already in memory (azure-ai-ml's entity, dumped): planned from here, not read back from
    #: `file`, which names the job and whose folder relative paths start from
    data: Optional[Dict[str, Any]] = None


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


@contextlib.contextmanager
def empty_code(dry_run: bool) -> Iterator[Path]:
    """The source folder of a command job without `code:` (Azure runs it in an empty folder): one empty
    folder under MLTRAIN_HOME, snapshotted like any other, made here only (the CLI's and the SDK's jobs).
    Freezing checks that a job's source folder exists, dry run or not: a dry run that had to make it removes it
    again, leaving nothing behind."""
    from mltrain.base.home import mltrain_home  # startup

    path = mltrain_home() / "azureml" / EMPTY_CODE
    made, missing = [], path
    while not missing.exists():  # deepest first
        made.append(missing)
        missing = missing.parent
    path.mkdir(parents=True, exist_ok=True)
    try:
        yield path
    finally:
        if dry_run:
            for folder in made:
                with contextlib.suppress(OSError):  # a run of another command put something there meanwhile
                    folder.rmdir()


def with_empty_code(values: Any, empty: str) -> Any:
    """A generated file's values with the empty source folder's placeholder made its path."""
    job = values.get("job") if isinstance(values, dict) else None
    if isinstance(job, dict) and job.get("source_directory") == EMPTY_CODE:
        values = dict(values, job=dict(job, source_directory=empty))
    return values


def config_nodes_of(files: Dict[str, Dict[str, Any]], empty: str) -> Tuple[ConfigNode, ...]:
    """A plan's generated files (`azureml_job/NAME.yaml`, `pipeline/NAME.yaml`) as in-memory config nodes."""
    nodes = []
    for relative_path, values in files.items():
        group, _, name = relative_path[:-len(".yaml")].partition("/")
        nodes.append(ConfigNode(group, name, with_empty_code(values, empty), "_global_" if group == GROUP else None))
    return tuple(nodes)
