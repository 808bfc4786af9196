"""Every use mltrain makes of azure-ai-ml's internals, in one place, each with why; nothing else in mltrain touches a
private name of azure-ai-ml (tests/unit/test_fences.py holds that). Checked against azure-ai-ml 1.35.2.

mltrain's client (mltrain.azureml.sdk_v2) takes the SDK's own entities, built by the user's notebook, and runs
them here. What a job file would say is read from the entity:

- `entity_dict`: the entity's `_to_dict()`, the SDK's YAML schema dump, which `dump()` writes to a file; read in
  memory, without a file (mltrain.azureml.sdk_v2.entities).
- `builder_job`: a builder (`command(...)`, a sweep node) as the job it submits: its `_to_job()`, what
  `MLClient.jobs.create_or_update` itself calls on a builder.
- `base_path` / `source_path`: the folder the entity was built in (`_base_path`: the notebook's folder, against
  which its local paths are relative) and the YAML file it was loaded from (`_source_path`: a component file is
  then used as is, and its refusals name that file's lines). Neither has a public reader.
- `given_value`: what a node's input port was given (`_data`): the port wraps it, and its public `path`/`type`
  describe the port, not the value (a literal passed to a component's input).
- `node_component`: the component entity a pipeline node runs (`_component`), the node's public `component`
  being a name or an ID once it was registered.
- `as_component`: a `@dsl.pipeline` function (`_is_dsl_func`) or an mldesigner component function
  (`_is_mldesigner_component`) given to `ml_client.components.create_or_update`, turned into its component entity
  by Azure's own `_refine_component`, as Azure's ComponentOperations does.
- `workspace`: a Workspace entity carrying its Azure resource id (`_id`), which the SDK sets only from the service's
  answer (`Workspace.id` is read-only); notebooks split it to read the subscription and resource group back.
- `set_status`: a job entity's status (`_status`), which the SDK sets only from the service's answer (`Job.status`
  is read-only); mltrain's client answers `jobs.get`/`create_or_update` with the run's status here.
- `is_anonymous`: whether an asset entity was given no name (`_is_anonymous`: `Model(path=...)` gets a hash for its
  name), so that a deployment registers it under a name of its own, as the YAML front end names an inline model.
- `online_endpoint` / `online_deployment`: the entities Azure's service answers with, carrying what only the service
  fills in (`scoring_uri`, `openapi_uri`, `provisioning_state`): their constructors take these as keyword arguments
  that only OnlineEndpoint documents, and OnlineDeployment not at all (read-only properties otherwise).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional

CHECKED_AGAINST = {"azure-ai-ml": "1.35.2"}


def entity_dict(entity: Any) -> Dict[str, Any]:
    return dict(entity._to_dict())


def builder_job(entity: Any) -> Any:
    """A builder (`command(...)`, a sweep node) as the job it submits; a job as itself."""
    to_job = getattr(entity, "_to_job", None)
    return to_job() if callable(to_job) and type(entity).__name__ in ("Command", "Sweep") else entity


def base_path(entity: Any) -> str:
    """The folder the entity was built in (the current one when it does not say)."""
    return str(getattr(entity, "_base_path", None) or os.getcwd())


def source_path(entity: Any) -> Optional[str]:
    """The YAML file the entity was loaded from, or None."""
    source = getattr(entity, "_source_path", None)
    return str(source) if source else None


def given_value(port: Any, default: Any) -> Any:
    """What a node's input port was given (a literal, an Input), or `default` for a port that wraps nothing."""
    return getattr(port, "_data", default)


def node_component(node: Any) -> Any:
    """The component entity a pipeline node runs, or None."""
    return getattr(node, "_component", None)


def as_component(component: Any) -> Any:
    """A `@dsl.pipeline` or mldesigner component function as its component entity; anything else as given."""
    if callable(component) and (getattr(component, "_is_dsl_func", False)
                                or getattr(component, "_is_mldesigner_component", False)):
        from azure.ai.ml.operations._component_operations import _refine_component  # optional

        return _refine_component(component)  # Azure's own: a @dsl.pipeline function's PipelineComponent
    return component


def workspace(name: str, description: str, resource_id: str) -> Any:
    """azure-ai-ml's Workspace entity for a local workspace, its `id` the given Azure resource id."""
    from azure.ai.ml.entities import Workspace  # optional

    entity = Workspace(name=name, location="local", description=description)
    entity._id = resource_id
    return entity


def compute(name: str, description: str, size: str, max_instances: int, created_on: str) -> Any:
    """azure-ai-ml's AmlCompute for a mapped compute name, with the fields Azure's service fills in and notebooks
    print (`provisioning_state`, `created_on`): its constructor takes them only as undocumented keyword arguments."""
    from azure.ai.ml.entities import AmlCompute  # optional

    return AmlCompute(name=name, description=description, size=size, min_instances=0, max_instances=max_instances,
                      location="local", provisioning_state="Succeeded", created_on=created_on)


def set_status(job: Any, status: str) -> None:
    """A job entity's status, as the service's answer would set it."""
    job._status = status


def is_anonymous(asset: Any) -> bool:
    """Whether an asset entity (a Model, an Environment) was made without a name."""
    return bool(getattr(asset, "_is_anonymous", False))


def online_endpoint(cls: Any, scoring_uri: str, openapi_uri: str, provisioning_state: str, **fields: Any) -> Any:
    """An online endpoint entity of class `cls` as the service returns it."""
    return cls(scoring_uri=scoring_uri, openapi_uri=openapi_uri, provisioning_state=provisioning_state, **fields)


def online_deployment(cls: Any, provisioning_state: str, **fields: Any) -> Any:
    """An online deployment entity of class `cls` as the service returns it."""
    return cls(provisioning_state=provisioning_state, **fields)
