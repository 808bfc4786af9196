"""One REST call to a published pipeline, submitted in a process of its own: `mltrain ui`'s handler
(mltrain.cli.pipeline_rest) starts `python -m azureml.pipeline.core._rest_submit` with the call on stdin
and reads one JSON line back: {"Id": run_id, ...} or {"error": one line}.

A process per call, not an import into the UI's server: the stand-ins (and the user's step objects they
unpickle) stay out of mltrain's own process, and the submit runs from the workspace folder it was
published in, as the user's script did."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict


def _submit(call: Dict[str, Any]) -> Dict[str, Any]:
    from azureml.core.dataset import Dataset
    from azureml.core.datastore import Datastore
    from azureml.core.experiment import Experiment
    from azureml.core.workspace import Workspace
    from azureml.data.datapath import DataPath
    from azureml.exceptions import UserErrorException
    from azureml.pipeline.core.pipeline_endpoint import PipelineEndpoint
    from azureml.pipeline.core.published_pipeline import PublishedPipeline

    body = call.get("body")
    if not isinstance(body, dict) or not body.get("ExperimentName"):
        raise UserErrorException('the request body must be JSON with "ExperimentName" (and optionally '
                                 '"ParameterAssignments": {name: value})')
    if call["kind"] == "pipeline":
        published = PublishedPipeline.get(None, call["id"])
    else:
        endpoint = PipelineEndpoint.get(None, id=call.get("id"), name=call.get("name"))
        if endpoint.status != "Active":
            raise UserErrorException(f"PipelineEndpoint '{endpoint.name}' is {endpoint.status}: enable() it first")
        published = endpoint.get_pipeline(call.get("version"))
    folder = str(published._record.get("workspace") or os.getcwd())
    os.chdir(folder)  # a step whose compute target is a name finds its workspace here, as at publish
    try:
        workspace = Workspace.from_config(folder)
    except UserErrorException:  # published from a script with no config.json: its folder is the workspace
        workspace = Workspace(path=folder)
    published._workspace = workspace
    parameters = dict(body.get("ParameterAssignments") or {})
    for name, where in dict(body.get("DataPathAssignments") or {}).items():  # Azure's DataPath parameters
        parameters[name] = DataPath(Datastore(workspace, where.get("DataStoreName") or Datastore.DEFAULT),
                                    where.get("RelativePath"))
    for name, where in dict(body.get("DataSetDefinitionValueAssignments") or {}).items():  # Azure's dataset parameters
        reference = dict(where or {}).get("SavedDataSetReference") or {}
        if not reference.get("Id"):
            raise UserErrorException(f'DataSetDefinitionValueAssignments["{name}"] must be {{"SavedDataSetReference": '
                                     '{"Id": dataset id}}')
        parameters[name] = Dataset.get_by_id(workspace, reference["Id"])
    run = published._submit(Experiment(workspace, str(body["ExperimentName"])), body.get("Tags"),
                            {"front_end": "azureml-v1-rest"}, pipeline_parameters=parameters)
    return {"Id": run.id, "ExperimentName": body["ExperimentName"], "PipelineId": published.id,
            "Status": "Running"}


def main() -> int:
    try:
        answer = _submit(json.loads(sys.stdin.read()))
    except (Exception, NotImplementedError) as exc:  # noqa: BLE001 (every failure is the caller's one line)
        answer = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    print(json.dumps(answer), flush=True)
    return 0 if "Id" in answer else 1


if __name__ == "__main__":
    sys.exit(main())
