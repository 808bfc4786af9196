"""PipelineDraft: a pipeline kept under a name while it is being edited (update), run (submit_run) and at
last published (publish). A draft is not a snapshot: it runs its steps' source folders as they are at
submit_run, as Pipeline.submit does; publish() snapshots them, as Pipeline.publish does.

Kept in `$MLTRAIN_HOME/v1_published/drafts/<id>/` (draft.json and the pickled pipeline).
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException
from azureml.pipeline.core.published_pipeline import (
    Recorded,
    anchored,
    load_pipeline,
    read_json,
    save_pipeline,
    store,
    write_json,
)


class PipelineDraft(Recorded):
    @property
    def experiment_name(self) -> Optional[str]:
        return self._record.get("experiment_name")

    @property
    def tags(self) -> Dict[str, str]:
        return dict(self._record.get("tags") or {})

    @property
    def properties(self) -> Dict[str, str]:
        return dict(self._record.get("properties") or {})

    @property
    def pipeline_parameters(self) -> Dict[str, Any]:
        return dict(self._record.get("pipeline_parameters") or {})

    @property
    def continue_on_step_failure(self) -> bool:
        return bool(self._record.get("continue_on_step_failure"))

    @property
    def last_submitted_pipeline_run_id(self) -> Optional[str]:
        return self._record.get("last_submitted_pipeline_run_id")

    def _folder(self) -> Any:
        return store("drafts") / self.id

    def _save(self, pipeline: Any = None) -> None:
        if pipeline is not None:
            pipeline._graph(self.pipeline_parameters)  # a draft that cannot compile is refused now
            save_pipeline(anchored(pipeline), self._folder() / "pipeline.pkl")
        write_json(self._folder() / "draft.json", self._record)

    # ------------------------------------------------------------------ creating and finding
    @staticmethod
    def create(workspace: Any, pipeline: Any, name: Optional[str] = None, description: Optional[str] = None,
               experiment_name: Optional[str] = None, pipeline_parameters: Optional[Dict[str, Any]] = None,
               continue_on_step_failure: Optional[bool] = None, tags: Optional[Dict[str, str]] = None,
               properties: Optional[Dict[str, str]] = None, _workflow_provider: Any = None,
               _service_endpoint: Any = None) -> PipelineDraft:
        if not experiment_name:
            raise UserErrorException("PipelineDraft.create: experiment_name is required (the draft's runs go there)")
        record = {"id": str(uuid.uuid4()), "name": str(name or "PipelineDraft"), "description": description,
                  "experiment_name": experiment_name, "pipeline_parameters": dict(pipeline_parameters or {}),
                  "continue_on_step_failure": bool(continue_on_step_failure), "tags": dict(tags or {}),
                  "properties": dict(properties or {}), "last_submitted_pipeline_run_id": None,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        draft = PipelineDraft(workspace, record)
        draft._save(pipeline)
        return draft

    @staticmethod
    def get(workspace: Any, id: str, _workflow_provider: Any = None, _service_endpoint: Any = None) -> PipelineDraft:
        return PipelineDraft(workspace, read_json(store("drafts") / str(id) / "draft.json", f"PipelineDraft '{id}'"))

    @staticmethod
    def list(workspace: Any, tags: Optional[Dict[str, str]] = None, _workflow_provider: Any = None,
             _service_endpoint: Any = None) -> List[PipelineDraft]:
        found = [PipelineDraft(workspace, read_json(p, "a pipeline draft")) for p in store("drafts").glob("*/draft.json")]
        found.sort(key=lambda d: str(d._record.get("created")))
        return [d for d in found if all(d.tags.get(k) == v for k, v in (tags or {}).items())]

    # ------------------------------------------------------------------ editing
    def get_graph(self) -> Any:
        """The draft's pipeline (Azure answers its graph; here the Pipeline itself)."""
        return load_pipeline(self._folder() / "pipeline.pkl")

    def update(self, pipeline: Any = None, name: Optional[str] = None, description: Optional[str] = None,
               experiment_name: Optional[str] = None, tags: Optional[Dict[str, str]] = None,
               pipeline_parameters: Optional[Dict[str, Any]] = None,
               continue_on_step_failure: Optional[bool] = None) -> None:
        for key, value in (("name", name), ("description", description), ("experiment_name", experiment_name),
                           ("tags", tags), ("pipeline_parameters", pipeline_parameters),
                           ("continue_on_step_failure", continue_on_step_failure)):
            if value is not None:
                self._record[key] = value
        self._save(pipeline if pipeline is not None else (self.get_graph() if pipeline_parameters else None))

    def clone(self, _workflow_provider: Any = None) -> PipelineDraft:
        record = {**self._record, "id": str(uuid.uuid4()), "last_submitted_pipeline_run_id": None,
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        draft = PipelineDraft(self._workspace, record)
        draft._save(self.get_graph())
        return draft

    def delete(self) -> None:
        import shutil

        shutil.rmtree(self._folder(), ignore_errors=True)

    # ------------------------------------------------------------------ running and publishing
    def submit_run(self, _workflow_provider: Any = None) -> Any:
        from azureml.core._bridge import origin
        from azureml.core.experiment import Experiment

        run = self.get_graph()._submit(Experiment(self._workspace, str(self.experiment_name)), self.tags, origin(),
                                       pipeline_parameters=self.pipeline_parameters,
                                       continue_on_step_failure=self.continue_on_step_failure)
        self._record["last_submitted_pipeline_run_id"] = run.id
        self._save()
        return run

    def publish(self, _workflow_provider: Any = None) -> Any:
        return self.get_graph().publish(name=self.name, description=self.description,
                                        continue_on_step_failure=self.continue_on_step_failure)

    def __str__(self) -> str:
        return (f"PipelineDraft(Name: {self.name}, Id: {self.id}, Experiment: {self.experiment_name}, "
                f"Tags: {self.tags})")

    __repr__ = __str__
