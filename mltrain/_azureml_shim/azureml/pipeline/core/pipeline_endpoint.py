"""PipelineEndpoint: one name in front of versions of published pipelines ("0", "1", ... as Azure numbers
them), one of them the default; `submit` and a POST to its `endpoint` run the default or a named version.

Kept in `$MLTRAIN_HOME/v1_published/endpoints/<id>.json`; each version is a PublishedPipeline's id.
"""
from __future__ import annotations

import time
import uuid
from typing import Any, Dict, List, Optional

from azureml.exceptions import UserErrorException
from azureml.pipeline.core.published_pipeline import (
    ENDPOINT_PATH,
    PublishedPipeline,
    Recorded,
    read_json,
    rest_url,
    store,
    write_json,
)


class PipelineIdVersion:
    """One version of an endpoint (Azure's `list_versions()` items): `version`, `pipeline_id`, `pipeline`."""

    def __init__(self, workspace: Any, pipeline_id: str, version: str) -> None:
        self._workspace = workspace
        self.pipeline_id = pipeline_id
        self.version = version

    @property
    def pipeline(self) -> PublishedPipeline:
        return PublishedPipeline.get(self._workspace, self.pipeline_id)

    def __repr__(self) -> str:
        return f"PipelineIdVersion(version={self.version!r}, pipeline_id={self.pipeline_id!r})"


def _published(workspace: Any, pipeline: Any, name: str, description: Optional[str]) -> PublishedPipeline:
    """A PublishedPipeline as given, or a Pipeline published now (Azure's PipelineEndpoint.publish takes both)."""
    if isinstance(pipeline, PublishedPipeline):
        return pipeline
    if hasattr(pipeline, "publish") and hasattr(pipeline, "_steps"):
        return pipeline.publish(name=name, description=description)  # type: ignore[no-any-return]
    raise UserErrorException(f"PipelineEndpoint: pipeline must be a Pipeline or PublishedPipeline, not "
                             f"{type(pipeline).__name__}")


class PipelineEndpoint(Recorded):
    @property
    def status(self) -> str:
        return str(self._record["status"])

    @property
    def default_version(self) -> str:
        return str(self._record["default_version"])

    @property
    def pipeline_version_list(self) -> List[PipelineIdVersion]:
        return self.list_versions()

    @property
    def endpoint(self) -> str:
        """POST here runs the default version; `+ "/" + version` a given one (Azure's URL shapes, served by `mltrain ui`)."""
        return rest_url("PipelineEndpoint.endpoint") + ENDPOINT_PATH + "Id/" + self.id

    @property
    def url(self) -> str:
        return self.endpoint

    # ------------------------------------------------------------------ creating and finding
    @staticmethod
    def publish(workspace: Any, name: str, description: str, pipeline: Any, _workflow_provider: Any = None,
                _service_endpoint: Any = None) -> PipelineEndpoint:
        if any(e.name == name for e in PipelineEndpoint.list(workspace, active_only=False)):
            raise UserErrorException(f"PipelineEndpoint '{name}' already exists: PipelineEndpoint.get(workspace, "
                                     f"name='{name}').add_default(pipeline) adds a version")
        published = _published(workspace, pipeline, name, description)
        record = {"id": str(uuid.uuid4()), "name": str(name), "description": description, "status": "Active",
                  "default_version": "0", "versions": [{"version": "0", "pipeline_id": published.id}],
                  "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        endpoint = PipelineEndpoint(workspace, record)
        endpoint._save()
        return endpoint

    @staticmethod
    def get(workspace: Any, id: Optional[str] = None, name: Optional[str] = None, _workflow_provider: Any = None,
            _service_endpoint: Any = None) -> PipelineEndpoint:
        if id is not None:
            return PipelineEndpoint(workspace, read_json(store("endpoints") / f"{id}.json", f"PipelineEndpoint '{id}'"))
        if name is None:
            raise UserErrorException("PipelineEndpoint.get: give id= or name=")
        for endpoint in PipelineEndpoint.list(workspace, active_only=False):
            if endpoint.name == name:
                return endpoint
        known = ", ".join(e.name for e in PipelineEndpoint.list(workspace, active_only=False)) or "none"
        raise UserErrorException(f"PipelineEndpoint '{name}' was not found (endpoints: {known})")

    @staticmethod
    def list(workspace: Any, active_only: bool = True, _workflow_provider: Any = None,
             _service_endpoint: Any = None) -> List[PipelineEndpoint]:
        found = [PipelineEndpoint(workspace, read_json(p, "a pipeline endpoint")) for p in store("endpoints").glob("*.json")]
        found.sort(key=lambda e: str(e._record.get("created")))
        return [e for e in found if e.status == "Active" or not active_only]

    def _save(self) -> None:
        write_json(store("endpoints") / f"{self.id}.json", self._record)

    def _fresh(self) -> None:
        """Read the record again: another process may have added a version since this object was made."""
        self._record = read_json(store("endpoints") / f"{self.id}.json", f"PipelineEndpoint '{self.id}'")

    # ------------------------------------------------------------------ versions
    def list_versions(self) -> List[PipelineIdVersion]:
        self._fresh()
        return [PipelineIdVersion(self._workspace, v["pipeline_id"], v["version"]) for v in self._record["versions"]]

    def list_pipelines(self, active_only: bool = True, _workflow_provider: Any = None,
                       _service_endpoint: Any = None) -> List[PublishedPipeline]:
        pipelines = [v.pipeline for v in self.list_versions()]
        return [p for p in pipelines if p.status == "Active" or not active_only]

    def get_default_version(self) -> str:
        self._fresh()
        return self.default_version

    def _version(self, version: Any) -> Dict[str, Any]:
        self._fresh()
        wanted = self.default_version if version is None else str(version)
        for entry in self._record["versions"]:
            if entry["version"] == wanted:
                return dict(entry)
        known = ", ".join(v["version"] for v in self._record["versions"])
        raise UserErrorException(f"PipelineEndpoint '{self.name}' has no version '{wanted}' (versions: {known})")

    def get_pipeline(self, version: Any = None) -> PublishedPipeline:
        return PublishedPipeline.get(self._workspace, self._version(version)["pipeline_id"])

    def set_default_version(self, version: Any) -> None:
        self._record["default_version"] = self._version(version)["version"]
        self._save()

    def add(self, pipeline: Any) -> None:
        """A new version (the next number), not the default; a pipeline already there keeps its version."""
        published = _published(self._workspace, pipeline, self.name, self.description)
        self._fresh()
        if not any(v["pipeline_id"] == published.id for v in self._record["versions"]):
            self._record["versions"].append({"version": str(len(self._record["versions"])),
                                             "pipeline_id": published.id})
            self._save()

    def add_default(self, pipeline: Any) -> None:
        self.set_default(pipeline)

    def set_default(self, pipeline: Any) -> None:
        published = _published(self._workspace, pipeline, self.name, self.description)
        self.add(published)
        entry = next(v for v in self._record["versions"] if v["pipeline_id"] == published.id)
        self._record["default_version"] = entry["version"]
        self._save()

    # ------------------------------------------------------------------ state and name
    def set_name(self, name: str) -> None:
        if any(e.name == name and e.id != self.id for e in PipelineEndpoint.list(self._workspace, active_only=False)):
            raise UserErrorException(f"PipelineEndpoint '{name}' already exists: choose another name")
        self._fresh()
        self._record["name"] = str(name)
        self._save()

    def _set_status(self, status: str) -> None:
        self._fresh()
        self._record["status"] = status
        self._save()

    def disable(self) -> None:
        self._set_status("Disabled")

    def enable(self) -> None:
        self._set_status("Active")

    def archive(self) -> None:
        self.disable()

    def reactivate(self, name: str) -> None:
        self.set_name(name)
        self.enable()

    # ------------------------------------------------------------------ running it
    def submit(self, experiment_name: str, pipeline_parameters: Optional[Dict[str, Any]] = None,
               parent_run_id: Any = None, pipeline_version: Optional[str] = None) -> Any:
        from azureml.core._bridge import origin
        from azureml.core.experiment import Experiment

        return self._submit(Experiment(self._workspace, experiment_name), None, origin(),
                            pipeline_parameters=pipeline_parameters, pipeline_version=pipeline_version)

    def _submit(self, experiment: Any, tags: Any, origin: Dict[str, Any],
                pipeline_parameters: Optional[Dict[str, Any]] = None, pipeline_version: Optional[str] = None,
                parent_run_id: Any = None, **kwargs: Any) -> Any:
        """`Experiment.submit(endpoint, pipeline_version=...)` lands here."""
        self._fresh()
        if self.status != "Active":
            raise UserErrorException(f"PipelineEndpoint '{self.name}' is {self.status}: enable() it before "
                                     "submitting it")
        return self.get_pipeline(pipeline_version)._submit(experiment, tags, origin,
                                                           pipeline_parameters=pipeline_parameters)

    def __repr__(self) -> str:
        versions = ", ".join(v["version"] for v in self._record["versions"])
        return (f"PipelineEndpoint(Name: {self.name},\nId: {self.id},\nStatus: {self.status},\n"
                f"Default version: {self.default_version},\nVersions: {versions})")
