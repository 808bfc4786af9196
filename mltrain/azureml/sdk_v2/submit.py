"""An azure-ai-ml job entity submitted on mltrain: written as the v2 job file it stands for
(sdk_v2.entities), planned by the YAML front end (mltrain.azureml.job_plan), and queued through the
typed job API (mltrain.api): a command job with `submit_request`, a sweep or a pipeline with
`submit_multirun` (their engines outlive the notebook). Each submission keeps a folder
`$MLTRAIN_HOME/azureml_sdk/NAME/`: the job file (`mltrain job create --file` of it runs the same job),
the generated config files, and `job.json` saying where the run is, so a later process finds it by name.
"""
from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import yaml

from mltrain.api import MultirunRequest, Run, submit_multirun, submit_request
from mltrain.atomic import atomic_write
from mltrain.azureml import job_plan
from mltrain.azureml.job_request import EMPTY_CODE, GROUP, Request
from mltrain.azureml.sdk_v2.entities import job_entity, to_v2
from mltrain.azureml.v2_schema import AZURE_ONLY_TYPES, RUNS
from mltrain.config.paths import extra_config_dirs
from mltrain.errors import MltrainError
from mltrain.home import mltrain_home
from mltrain.launch.request import JobRequest
from mltrain.runs.console import Console, Silent

FRONT_END = "azureml-sdk-v2"
RECORD = "job.json"


@dataclass
class Submitted:
    name: str
    kind: str                    # command | sweep | pipeline
    folder: Path                 # $MLTRAIN_HOME/azureml_sdk/NAME
    run: Optional[Run] = None    # a command job's run
    driver: Any = None           # a sweep's or pipeline's driver (mltrain.api.MultirunDriver)


def sdk_root() -> Path:
    return mltrain_home() / "azureml_sdk"


def new_name(job: Any) -> str:
    """Azure names an unnamed job itself; here: its display name (or type), the time and a short id."""
    stem = re.sub(r"[^A-Za-z0-9_-]", "_", str(getattr(job, "display_name", None) or getattr(job, "type", None) or "job"))
    return f"{stem}_{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:6]}"


def submit(entity: Any, experiment_name: Optional[str] = None, compute: Optional[str] = None) -> Submitted:
    """Queue the entity's job; raises MltrainError (the YAML front end's one line) before anything exists."""
    job = job_entity(entity)
    refuse_azure_only(job)
    if compute:
        job.compute = compute
    name = str(getattr(job, "name", None) or new_name(job))
    folder = sdk_root() / name
    experiment = experiment_name or getattr(job, "experiment_name", None)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        _, data = to_v2(job, str(folder))
        data["name"] = name
        file = folder / f"{name}.yml"
        text = f"# the {type(entity).__name__} entity of azure-ai-ml, as a v2 job file (mltrain)\n"
        file.write_text(text + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return _queue(entity, name, folder, file, experiment)
    except BaseException:
        if not (folder / RECORD).is_file():  # refused before anything was queued: nothing is left of it
            shutil.rmtree(folder, ignore_errors=True)
        raise


#: azure-ai-ml's entity classes (a class of the entity's own or one it derives from) of the job types mltrain
#: leaves to Azure, and the v2 `type` each stands for.
AZURE_ONLY_ENTITIES = {"AutoMLJob": "automl", "SparkJob": "spark", "Spark": "spark", "DataTransferJob": "data_transfer",
                       "DataTransfer": "data_transfer", "ImportJob": "import", "Import": "import"}


def refuse_azure_only(job: Any, where: str = "") -> None:
    """An Azure-only job, or a pipeline with one among its nodes, refused with the YAML front end's line before
    the entity is written out: azure-ai-ml cannot always dump them without Azure (an AutoML forecasting job with
    a `best_model` output: 'OutputSchema needs type Output to dump', Azure's distributed-TCN notebook)."""
    for cls in type(job).__mro__:
        kind = AZURE_ONLY_ENTITIES.get(cls.__name__)
        if kind:
            raise MltrainError(f"{where or type(job).__name__}: '{kind}' jobs run only in Azure ML: "
                               f"{AZURE_ONLY_TYPES[kind]}; mltrain runs {', '.join(RUNS)} jobs")
    for name, node in (getattr(job, "jobs", None) or {}).items():
        refuse_azure_only(node, f"{where or type(job).__name__}.jobs.{name}")


def _queue(entity: Any, name: str, folder: Path, file: Path, experiment: Optional[str]) -> Submitted:
    plan = job_plan.plan(Request(file=str(file), name=name, experiment_name=experiment))
    generated = folder / "config"
    _write_files(plan.files, generated)
    dirs = (str(generated), *plan.config_dirs)
    origin = {"front_end": FRONT_END, "file": str(file), "entity": type(entity).__name__}
    if plan.kind in ("command", "parallel"):  # one run each
        # mltrain.launch.request.compose builds Hydra's initialize_config_module (which reads the search path)
        # before it sets the request's folders: set them around the whole call too.
        with extra_config_dirs(dirs):
            run = submit_request(JobRequest(overrides=tuple(plan.overrides), config_dirs=dirs, origin=origin),
                                 console=Console(stream=Silent()))
        _record(folder, name, "command", run_dir=str(run.run_dir))
        return Submitted(name, "command", folder, run=run)
    runs = mltrain_home() / "runs"
    if plan.kind == "sweep":
        sweep_dir = runs / "_sweeps" / name
        overrides = (*plan.overrides, f"hydra.sweep.dir={sweep_dir}")
        ready = sweep_dir / "sweep.json"
        where = {"sweep_dir": str(sweep_dir)}
    else:
        overrides = tuple(plan.overrides)
        if experiment:
            overrides += (f"experiment_name={experiment}",)
        ready = runs / name / "run.json"
        where = {"run_dir": str(runs / name)}
    driver = submit_multirun(MultirunRequest(overrides=overrides, ready=str(ready), config_dirs=dirs, name=name))
    _record(folder, name, plan.kind, driver=str(driver.folder), driver_pid=driver.process.pid, **where)
    return Submitted(name, plan.kind, folder, driver=driver)


def _write_files(files: Dict[str, Dict[str, Any]], folder: Path) -> None:
    """The plan's generated config files, as `mltrain job create` writes them."""
    empty = folder / EMPTY_CODE
    empty.mkdir(parents=True, exist_ok=True)
    for rel, values in files.items():
        job = values.get("job") if isinstance(values, dict) else None
        if isinstance(job, dict) and job.get("source_directory") == EMPTY_CODE:
            values = dict(values, job=dict(job, source_directory=str(empty)))
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        head = "# @package _global_\n" if rel.startswith(GROUP + "/") else ""
        path.write_text(head + yaml.safe_dump(values, sort_keys=False), encoding="utf-8")


def _record(folder: Path, name: str, kind: str, **where: Any) -> None:
    atomic_write(folder / RECORD, json.dumps({"name": name, "kind": kind, **where}, indent=2))


def find(name: str) -> Optional[Dict[str, Any]]:
    """What a submission of this process or an earlier one recorded for NAME; None for a plain mltrain run."""
    path = sdk_root() / name / RECORD
    if path.is_file():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return None


def outcome(record: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A sweep's or pipeline's driver outcome once it ended ({status, error, exit_code}), None while it runs."""
    folder = record.get("driver")
    path = Path(folder) / "outcome.json" if folder else None
    if path is not None and path.is_file():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return None



