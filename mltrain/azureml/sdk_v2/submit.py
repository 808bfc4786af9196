"""An azure-ai-ml job entity submitted on mltrain: written as the v2 job file it stands for
(sdk_v2.entities), planned by the YAML front end (mltrain.azureml.job_plan), and queued through the
typed job API (mltrain.python_api.api): a command job with `submit_request`, a sweep or a pipeline with
`submit_multirun` (their engines outlive the notebook). Each submission keeps a folder
`$MLTRAIN_HOME/azureml_sdk/NAME/`: the job file (`mltrain job create --file` of it runs the same job) and
`job.json` saying where the run is, so a later process finds it by name. The plan reaches the engine as
typed config in memory (a command job's request config; a sweep's or pipeline's config nodes, in its
driver's request), as `mltrain job create` hands it over.
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

from mltrain.azureml import job_plan
from mltrain.azureml.job_create import GROUP, JobCreate, config_nodes_of, empty_code, with_empty_code
from mltrain.azureml.sdk_v2.entities import job_entity, to_v2
from mltrain.azureml.v2_schema import AZURE_ONLY_TYPES, RUNS
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.config.paths import extra_config_dirs
from mltrain.launch import multirun_files
from mltrain.launch.request import Request
from mltrain.python_api.api import Run, submit_multirun, submit_request
from mltrain.runs.console import Console, Silent

FRONT_END = "azureml-sdk-v2"
RECORD = "job.json"


@dataclass
class Submitted:
    name: str
    kind: str                    # command | sweep | pipeline
    folder: Path                 # $MLTRAIN_HOME/azureml_sdk/NAME
    run: Optional[Run] = None    # a command job's run
    driver: Any = None           # a sweep's or pipeline's driver (mltrain.python_api.api.MultirunDriver)


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
        # for the user to read, not read back: the plan is made from `data` in memory
        text = f"# the {type(entity).__name__} entity of azure-ai-ml, as a v2 job file (mltrain)\n"
        file.write_text(text + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return _queue(entity, name, folder, file, experiment, data)
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


def _queue(entity: Any, name: str, folder: Path, file: Path, experiment: Optional[str],
           data: Dict[str, Any]) -> Submitted:
    """The plan handed over typed: a command job's values as its request's in-memory config, a sweep's or
    pipeline's generated groups as config nodes carried to its driver (no config file written and read back)."""
    plan = job_plan.plan(JobCreate(file=str(file), name=name, experiment_name=experiment, data=data))
    origin = {"front_end": FRONT_END, "file": str(file), "entity": type(entity).__name__}
    dirs = tuple(plan.config_dirs)
    with empty_code(dry_run=False) as empty:
        if plan.kind in ("command", "parallel"):  # one run each
            (values,) = plan.files.values()
            generated = f"+{GROUP}="
            overrides = tuple(o for o in plan.overrides if not o.startswith(generated))
            # mltrain.launch.request.compose builds Hydra's initialize_config_module (which reads the search
            # path) before it sets the request's folders: set them around the whole call too
            with extra_config_dirs(dirs):
                run = submit_request(Request(overrides=overrides, config_dirs=dirs, origin=origin,
                                             values=with_empty_code(values, str(empty))),
                                     console=Console(stream=Silent()))
            _record(folder, name, "command", run_dir=str(run.run_dir))
            return Submitted(name, "command", folder, run=run)
        nodes = config_nodes_of(plan.files, str(empty))
    runs = mltrain_home() / "runs"
    # where the sweep goes and the experiment, as typed values (a folder may hold `,` `=` `(`: no override text)
    values: Dict[str, Any] = {}
    if plan.kind == "sweep":
        sweep_dir = runs / "_sweeps" / name
        values["hydra"] = {"sweep": {"dir": str(sweep_dir)}}
        ready = sweep_dir / "sweep.json"
        where = {"sweep_dir": str(sweep_dir)}
    else:
        if experiment:
            values["experiment_name"] = experiment
        ready = runs / name / "run.json"
        where = {"run_dir": str(runs / name)}
    request = Request(overrides=tuple(plan.overrides), config_dirs=dirs, nodes=nodes, values=values or None)
    driver = submit_multirun(request, ready=str(ready), name=name)
    _record(folder, name, plan.kind, driver=str(driver.folder), driver_pid=driver.process.pid, **where)
    return Submitted(name, plan.kind, folder, driver=driver)


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
    return multirun_files.read_outcome(Path(folder)) if folder else None



