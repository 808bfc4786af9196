"""PublishedPipeline: a v1 pipeline kept under a name, submitted again with new parameter values.

Azure keeps a published pipeline in the workspace and snapshots its steps' source folders at publish
time. Here the workspace is this machine: `$MLTRAIN_HOME/v1_published/pipelines/<id>/` holds

- `published.json`: id, name, description, version, status, the workspace folder, the parameters;
- `pipeline.pkl`: the pipeline's steps (pickled), pointing at the snapshot below. A submit compiles them
  again for its own parameter values, exactly as `Pipeline.submit` compiles a pipeline it is given;
- `snapshot/<n>/`: each step's source folder as it was at publish (the files a run would snapshot:
  `.amlignore`/`.gitignore` apply), so editing the scripts afterwards changes no published pipeline;
- `steps.yaml`: the steps compiled for the default values, for a reader.

What is not copied is data: datasets, datastore paths and DataPaths are read where they are at submit.
"""
from __future__ import annotations

import copy
import json
import os
import pickle
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException

#: Azure's URL paths, so a notebook that cuts an endpoint URL apart as Azure's does still finds its pieces.
PIPELINE_PATH = "/pipelines/v1.0/PipelineRuns/PipelineSubmit/"
ENDPOINT_PATH = "/pipelines/v1.0/PipelineRunSubmit/"


def store(kind: str) -> Path:
    """The folder of published pipelines, endpoints or drafts."""
    from mltrain.base.home import mltrain_home

    folder = Path(mltrain_home()) / "v1_published" / kind
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_json(path: Path, data: Dict[str, Any]) -> None:
    from mltrain.base.atomic import atomic_write  # submission

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=2, default=str) + "\n")


def read_json(path: Path, what: str) -> Dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise UserErrorException(f"{what} was not found (none under {path.parent.parent})") from None


def save_pipeline(pipeline: Any, path: Path) -> None:
    """Pickle the steps: a later process (another script, the REST server) compiles them for new values."""
    from mltrain.base.atomic import atomic_write_bytes  # submission

    try:
        data = pickle.dumps(pipeline)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise UserErrorException(f"this pipeline cannot be kept for later submits: a step holds {exc}") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, data)


def anchored(pipeline: Any) -> Any:
    """A copy whose steps name their source folders by absolute path: it runs the same from any folder."""
    kept = copy.deepcopy(pipeline)  # the copy keeps which step writes which data (deepcopy's memo)
    for step in kept._steps:
        step.source_directory = str(Path(step.source_directory or pipeline.default_source_directory or ".").resolve())
    return kept


def load_pipeline(path: Path) -> Any:
    try:
        return pickle.loads(path.read_bytes())
    except FileNotFoundError:
        raise UserErrorException(f"{path} is missing: the pipeline was not kept (publish it again)") from None


def rest_url(what: str) -> str:
    """The base URL of the server answering published pipelines' REST calls, or one line saying what to start."""
    from mltrain.cli.pipeline_rest import server_url  # submission

    url = server_url()
    if url is None:
        raise UserErrorException(f"{what}: no server answers published pipelines' REST calls on this machine: start "
                                 "`mltrain ui` (or `mltrain ui --pipelines-only`) and ask again")
    return str(url)


def parameters_of(pipeline: Any) -> Dict[str, Any]:
    """{name: default value} of the pipeline's PipelineParameters (Azure lists them on the published pipeline)."""
    from azureml.pipeline.core.graph import PipelineParameter
    from azureml.pipeline.steps.base import _unbound

    found: Dict[str, Any] = {}
    for step in pipeline._steps:
        for item in [*step.inputs, *step.arguments, *step.params.values(), *step._settings()]:
            item = _unbound(item)
            if isinstance(item, PipelineParameter):
                found[item.name] = item.default_value
    return found


def publish(pipeline: Any, name: Optional[str], description: Optional[str], version: Optional[str],
            continue_on_step_failure: Optional[bool]) -> PublishedPipeline:
    """Snapshot the steps' source folders, keep the steps pointing at the snapshot, record it."""
    import yaml  # submission

    from mltrain.launch.snapshot import take  # submission

    pipeline._graph({})  # a pipeline that cannot compile for its defaults is refused now, as Azure validates it
    pid = str(uuid.uuid4())
    folder = store("pipelines") / pid
    kept = anchored(pipeline)
    snapshots: Dict[str, str] = {}
    for step in kept._steps:
        source = str(step.source_directory)
        if source not in snapshots:
            dest = folder / "snapshot" / str(len(snapshots))
            info = take(source, dest, exclude=[str(folder.parent.parent.parent)])  # never MLTRAIN_HOME itself
            if info.warning:
                print(f"mltrain: warning: {info.warning}", flush=True)
            snapshots[source] = str(dest)
        step.source_directory = snapshots[source]
    steps, _ = kept._graph({})
    save_pipeline(kept, folder / "pipeline.pkl")
    (folder / "steps.yaml").write_text(yaml.safe_dump(steps, sort_keys=False), encoding="utf-8")
    record = {"id": pid, "name": str(name or "pipeline"), "description": description,
              "version": None if version is None else str(version), "status": "Active",
              "continue_on_step_failure": continue_on_step_failure,
              "workspace": str(getattr(pipeline.workspace, "path", os.getcwd())),
              "parameters": {k: repr(v) for k, v in parameters_of(kept).items()},
              "sources": snapshots, "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
    write_json(folder / "published.json", record)
    return PublishedPipeline(pipeline.workspace, record)


class Recorded:
    """An object kept as a JSON record under $MLTRAIN_HOME/v1_published (a published pipeline, an endpoint, a
    draft): Azure's constructor shape and the fields all three show."""

    def __init__(self, workspace: Any, _record: Dict[str, Any], **kwargs: Any) -> None:
        self._workspace = workspace
        self._record = _record

    @property
    def id(self) -> str:
        return str(self._record["id"])

    @property
    def name(self) -> str:
        return str(self._record["name"])

    @property
    def description(self) -> Optional[str]:
        return self._record.get("description")


class PublishedPipeline(Recorded):
    """A pipeline published under a name: submit it again with new `pipeline_parameters`, here or by REST."""

    # ------------------------------------------------------------------ what Azure shows
    @property
    def version(self) -> Optional[str]:
        return self._record.get("version")

    @property
    def status(self) -> str:
        return str(self._record["status"])

    @property
    def continue_on_step_failure(self) -> Optional[bool]:
        return self._record.get("continue_on_step_failure")

    @property
    def graph_id(self) -> str:
        return self.id  # one graph per published pipeline here

    @property
    def total_run_steps(self) -> int:
        return len(self._load()._steps)

    @property
    def endpoint(self) -> str:
        """The URL a POST starts this pipeline at (`mltrain ui` answers it): Azure's REST call shape."""
        return rest_url("PublishedPipeline.endpoint") + PIPELINE_PATH + self.id

    # ------------------------------------------------------------------ finding it
    @staticmethod
    def get(workspace: Any, id: str, _workflow_provider: Any = None, _service_endpoint: Any = None
            ) -> PublishedPipeline:
        return PublishedPipeline(workspace, read_json(store("pipelines") / str(id) / "published.json",
                                                      f"PublishedPipeline '{id}'"))

    @staticmethod
    def list(workspace: Any, active_only: bool = True, _service_endpoint: Any = None) -> List[PublishedPipeline]:
        found = [PublishedPipeline(workspace, read_json(p, "a published pipeline"))
                 for p in store("pipelines").glob("*/published.json")]
        found.sort(key=lambda p: str(p._record.get("created")), reverse=True)
        return [p for p in found if p.status == "Active" or not active_only]

    @staticmethod
    def get_all(workspace: Any, active_only: bool = True, _service_endpoint: Any = None) -> List[PublishedPipeline]:
        return PublishedPipeline.list(workspace, active_only)

    # ------------------------------------------------------------------ changing it
    def _set_status(self, status: str) -> None:
        path = store("pipelines") / self.id / "published.json"
        self._record = {**read_json(path, f"PublishedPipeline '{self.id}'"), "status": status}
        write_json(path, self._record)

    def disable(self) -> None:
        self._set_status("Disabled")

    def enable(self) -> None:
        self._set_status("Active")

    # ------------------------------------------------------------------ running it
    def _load(self) -> Any:
        return load_pipeline(store("pipelines") / self.id / "pipeline.pkl")

    def submit(self, workspace: Any, experiment_name: str, pipeline_parameters: Optional[Dict[str, Any]] = None,
               _workflow_provider: Any = None, _service_endpoint: Any = None, parent_run_id: Any = None,
               continue_on_step_failure: Optional[bool] = None) -> Any:
        from azureml.core._bridge import origin
        from azureml.core.experiment import Experiment

        return self._submit(Experiment(workspace, experiment_name), None, origin(),
                            pipeline_parameters=pipeline_parameters, continue_on_step_failure=continue_on_step_failure)

    def _submit(self, experiment: Any, tags: Any, origin: Dict[str, Any],
                pipeline_parameters: Optional[Dict[str, Any]] = None, continue_on_step_failure: Optional[bool] = None,
                parent_run_id: Any = None, **kwargs: Any) -> Any:
        """`Experiment.submit(published_pipeline, pipeline_parameters=...)` lands here, as Pipeline's does."""
        current = PublishedPipeline.get(self._workspace, self.id)  # another process may have disabled it
        if current.status != "Active":
            raise UserErrorException(f"PublishedPipeline '{self.name}' ({self.id}) is {current.status}: enable() it "
                                     "before submitting it")
        keep_going = self.continue_on_step_failure if continue_on_step_failure is None else continue_on_step_failure
        run = self._load()._submit(experiment, tags, origin, pipeline_parameters=pipeline_parameters,
                                   continue_on_step_failure=bool(keep_going))
        run._published_id = self.id
        return run

    def __repr__(self) -> str:
        return (f"PublishedPipeline(Name: {self.name},\nId: {self.id},\nStatus: {self.status},\n"
                f"Version: {self.version},\nParameters: {self._record.get('parameters')})")
