"""`ml_client.online_endpoints` and `ml_client.online_deployments` on mltrain's endpoints (mltrain.endpoints): a
deployment is Azure's inference server in a process of its own on this machine, serving a model of mltrain's
registry, with the endpoint's keys and traffic split.

    ml_client.online_endpoints.begin_create_or_update(ManagedOnlineEndpoint(name="my-endpoint")).result()
    ml_client.online_deployments.begin_create_or_update(ManagedOnlineDeployment(name="blue", ...)).result()
    endpoint.traffic = {"blue": 90, "green": 10}; ml_client.online_endpoints.begin_create_or_update(endpoint)
    ml_client.online_endpoints.invoke(endpoint_name="my-endpoint", request_file="sample-request.json")

The entities are azure-ai-ml's own (sdk_v2.online_specs reads them); a `begin_*` call has happened when it returns
(its poller is done), and a deployment is ready then, or it raised DeploymentException with the line that says why
(the scoring script's init() error), nothing of it left running. `local=True` (Azure's Docker endpoint) is the same
endpoint here, said once, and returns what Azure's local calls return (the entity, not a poller). Batch endpoints are
refused in one line (`batch_endpoints`, `batch_deployments`): mltrain scores batches as a parallel job.
"""
from __future__ import annotations

import json
import secrets
from typing import Any, Dict, List, Optional, Set

from mltrain.azureml.sdk_v2 import online_specs
from mltrain.azureml.sdk_v2.operations import Done
from mltrain.base.errors import MltrainError
from mltrain.endpoints import endpoint_record as records
from mltrain.endpoints import serving

LOCAL_NOTE = ("note: local=True: Azure runs a local endpoint in Docker; mltrain serves every endpoint as servers on "
              "this machine (no Docker), so an endpoint and its local namesake are one endpoint")
BATCH = ("batch endpoints are Azure's service; mltrain scores batches as a parallel job: `mltrain job create --file "
         "JOB.yml` of a `type: parallel` job, or ml_client.jobs.create_or_update of a parallel_run_function(...) job")
LOG_KINDS = ("inferenceserver", "inference-server", "storageinitializer", "storage-initializer")
_said: Set[str] = set()


def say(line: str) -> None:
    """A note, printed once in this process."""
    if line not in _said:
        _said.add(line)
        print(line, flush=True)


def _local(local: bool) -> None:
    if local:
        say(LOCAL_NOTE)


def _invalid(message: str, target: str = "ONLINE_ENDPOINT") -> Exception:
    from azure.ai.ml.exceptions import ErrorTarget, ValidationException  # optional

    return ValidationException(message=message, no_personal_data_message="mltrain refused the request",
                               target=getattr(ErrorTarget, target))


def _not_found(endpoint: Any, deployment: Optional[str] = None, local: bool = False) -> Exception:
    """What Azure raises for an endpoint or deployment it does not have (a local one: LocalEndpointNotFoundError)."""
    from azure.core.exceptions import ResourceNotFoundError  # optional

    if local:
        from azure.ai.ml.exceptions import LocalEndpointNotFoundError  # optional

        error: Exception = LocalEndpointNotFoundError(endpoint_name=str(endpoint), deployment_name=deployment)
        return error
    if deployment is not None:
        known = ", ".join(records.deployment_names(str(endpoint))) or "none"
        return ResourceNotFoundError(f"Online deployment {deployment} of endpoint {endpoint} not found (mltrain: its "
                                     f"deployments: {known})")
    return ResourceNotFoundError(f"Online endpoint {endpoint} not found (mltrain: endpoints here: "
                                 f"{', '.join(serving.names()) or 'none'})")


def _endpoint(name: Any, local: bool = False) -> records.EndpointRecord:
    if not isinstance(name, str) or not records.NAME.match(name) or not records.exists(name):
        raise _not_found(name, local=local)
    return records.load_endpoint(name)


class OnlineEndpointOperations:
    """Azure's OnlineEndpointOperations, on this machine's endpoints."""

    def begin_create_or_update(self, endpoint: Any, *, local: bool = False, **kwargs: Any) -> Any:
        _local(local)
        try:
            record = serving.create_or_update_endpoint(online_specs.endpoint_spec(endpoint, say))
        except MltrainError as exc:
            raise _invalid(str(exc)) from None
        entity = online_specs.endpoint_entity(record)
        return entity if local else Done(entity)

    def get(self, name: str, *, local: bool = False) -> Any:
        return online_specs.endpoint_entity(_endpoint(name, local))

    def list(self, *, local: bool = False) -> List[Any]:
        return [self.get(name) for name in serving.names()]

    def invoke(self, endpoint_name: str, *, request_file: Optional[str] = None, deployment_name: Optional[str] = None,
               input_data: Any = None, params_override: Any = None, local: bool = False, **kwargs: Any) -> str:
        """The request file's JSON sent to the endpoint with its key; the answer's body, as Azure returns it. An
        answer other than 200/201 raises what Azure's raises (ClientAuthenticationError for 401, ...)."""
        _local(local)
        _endpoint(endpoint_name, local)
        if input_data is not None:
            raise _invalid(f"invoke({endpoint_name}, input_data=...): input data is for batch endpoints; {BATCH}")
        if request_file is None:
            raise _invalid(f"invoke({endpoint_name}): give request_file, the JSON file to send")
        with open(request_file, "rb") as handle:
            data = json.loads(handle.read())  # as Azure's: the file must be JSON, sent as its parsed value
        try:
            status, body = serving.invoke(endpoint_name, json.dumps(data).encode(), deployment=deployment_name)
        except MltrainError as exc:
            raise _invalid(str(exc)) from None
        text = body.decode("utf-8", "replace")
        if status not in (200, 201):
            raise _http_error(status, text, endpoint_name)
        return text

    def get_keys(self, name: str) -> Any:
        """EndpointAuthKeys for a key endpoint; EndpointAuthToken (the key, which does not expire) for aml_token."""
        from azure.ai.ml.entities import EndpointAuthKeys, EndpointAuthToken  # optional

        record = _endpoint(name)
        keys = records.load_keys(name)
        if record.auth_mode == "aml_token":
            return EndpointAuthToken(access_token=keys.get("primaryKey"))
        return EndpointAuthKeys(primary_key=keys.get("primaryKey"), secondary_key=keys.get("secondaryKey"))

    def regenerate_keys(self, name: str, *, key_type: str = "primary") -> Any:
        """A new primary or secondary key (the other one keeps working, so clients can move over); the old one
        is refused from the next request on. mltrain's form of begin_regenerate_keys: it returns the keys."""
        _endpoint(name)
        which = {"primary": "primaryKey", "secondary": "secondaryKey"}.get(str(key_type).lower())
        if which is None:
            raise _invalid(f"regenerate_keys({name}, key_type={key_type!r}): key_type is 'primary' or 'secondary'")
        with records.locked(name):
            keys = records.load_keys(name) or records.make_keys(name)
            records.save_keys(name, {**keys, which: secrets.token_urlsafe(32)})
        return self.get_keys(name)

    def begin_regenerate_keys(self, name: str, *, key_type: str = "primary") -> Done:
        self.regenerate_keys(name, key_type=key_type)
        return Done()

    def begin_delete(self, name: Optional[str] = None, *, local: bool = False) -> Any:
        """The endpoint's servers stopped (nothing listens on its port after this) and its record removed."""
        _local(local)
        _endpoint(name, local)
        serving.delete_endpoint(str(name))
        return None if local else Done()


class OnlineDeploymentOperations:
    """Azure's OnlineDeploymentOperations, on this machine's endpoints."""

    def begin_create_or_update(self, deployment: Any, *, local: bool = False, vscode_debug: bool = False,
                               skip_script_validation: bool = False, local_enable_gpu: bool = False,
                               **kwargs: Any) -> Any:
        _local(local)
        if vscode_debug:
            raise _invalid("vscode_debug: Azure opens the local endpoint's Docker container in VS Code; mltrain's "
                           "server runs on this machine, its log with online_deployments.get_logs",
                           "ONLINE_DEPLOYMENT")
        name, endpoint = deployment.name, deployment.endpoint_name
        if not endpoint:
            raise _invalid(f"deployment {name}: a deployment needs endpoint_name, the endpoint it serves", "ONLINE_DEPLOYMENT")
        _endpoint(endpoint, local)
        try:
            spec = online_specs.deployment_spec(deployment, say)
        except MltrainError as exc:
            raise _invalid(str(exc), "ONLINE_DEPLOYMENT") from None
        try:
            serving.deploy(spec, log=say)
        except MltrainError as exc:
            raise _failed(str(exc)) from None
        entity = self.get(name, endpoint)
        return entity if local else Done(entity)

    def get(self, name: str, endpoint_name: str, *, local: bool = False) -> Any:
        endpoint = _endpoint(endpoint_name, local)
        if name not in records.deployment_names(endpoint_name):
            raise _not_found(endpoint_name, name, local)
        return online_specs.deployment_entity(records.load_deployment(endpoint_name, name), endpoint)

    def list(self, endpoint_name: str, *, local: bool = False) -> List[Any]:
        _endpoint(endpoint_name, local)
        return [self.get(name, endpoint_name) for name in records.deployment_names(endpoint_name)]

    def get_logs(self, name: str, endpoint_name: str, lines: Optional[int] = None, *,
                 container_type: Optional[str] = None, local: bool = False) -> str:
        """The server's log (its last `lines`): the scoring script's output and every request. Azure's storage
        initializer (which downloads the model) has no counterpart: the model's files are linked from the registry."""
        self.get(name, endpoint_name, local=local)
        kind = str(container_type or "InferenceServer").lower()
        if kind not in LOG_KINDS:
            raise _invalid(f"get_logs: container_type '{container_type}' is InferenceServer or StorageInitializer",
                           "ONLINE_DEPLOYMENT")
        if kind.startswith("storage"):
            model_dir = records.load_deployment(endpoint_name, name).model_dir
            return f"mltrain: no storage initializer; the model's files are linked from the registry into {model_dir}\n"
        return serving.logs(endpoint_name, name, lines)

    def begin_delete(self, name: str, endpoint_name: str, *, local: bool = False) -> Any:
        self.get(name, endpoint_name, local=local)
        try:
            serving.delete_deployment(endpoint_name, name)
        except MltrainError as exc:
            raise _invalid(str(exc), "ONLINE_DEPLOYMENT") from None
        return None if local else Done()


class BatchOperations:
    """`ml_client.batch_endpoints` / `batch_deployments`: every call refused in one line saying what mltrain has."""

    def __init__(self, kind: str) -> None:
        self._kind = kind

    def __getattr__(self, call: str) -> Any:
        if call.startswith("__"):
            raise AttributeError(call)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise _invalid(f"ml_client.{self._kind}.{call}: {BATCH}", "BATCH_ENDPOINT")
        return refuse


def refuse_batch(entity: Any) -> Exception:
    return _invalid(f"{type(entity).__name__}: {BATCH}", "BATCH_ENDPOINT")


def _failed(message: str) -> Exception:
    from azure.ai.ml import exceptions  # optional

    values: Dict[str, Any] = {"target": exceptions.ErrorTarget.ONLINE_DEPLOYMENT,
                              "error_category": exceptions.ErrorCategory.USER_ERROR}  # (enums typed as str)
    return exceptions.DeploymentException(message=message, no_personal_data_message="the deployment failed", **values)


def _http_error(status: int, text: str, endpoint: str) -> Exception:
    """What Azure's invoke raises for an answer that is not 200/201 (its validate_response)."""
    from azure.core import exceptions  # optional

    try:
        answer = json.loads(text)
    except ValueError:
        answer = None
    message = text.strip()
    if isinstance(answer, dict):
        inner = answer.get("error")
        message = str((inner.get("message") if isinstance(inner, dict) else None) or answer.get("message") or message)
    kinds: Dict[int, Any] = {401: exceptions.ClientAuthenticationError, 404: exceptions.ResourceNotFoundError,
                             408: exceptions.ServiceRequestTimeoutError, 409: exceptions.ResourceExistsError}
    kind = kinds.get(status, exceptions.HttpResponseError)
    error: Exception = kind(message=f"endpoint {endpoint} answered {status}: {' '.join(message.split())}")
    return error
