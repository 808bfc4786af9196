"""Endpoints and deployments made, changed, asked about and deleted: the one engine every front end calls
(`mltrain endpoints`, the v1 `Model.deploy` stand-ins, azure-ai-ml's online endpoint operations).

A deployment is a server process (serve.py) started in a session of its own, in the deployment's environment
(built as a run's is). `deploy` returns once the server answers its liveness probe, or raises with the line that
says why it ended (the scoring script's init() error, a port in use); a deployment that failed leaves nothing
running or listening. An update starts the new server beside the old one (both listen on the endpoint's port),
then stops the old: requests keep being answered. A change of the traffic rule returns once the deployments'
sockets on the endpoint's port follow it (balance.py).
"""
from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from mltrain.base.errors import MltrainError
from mltrain.endpoints import balance, endpoint_port, inference_server, models_dir, server_process
from mltrain.endpoints import endpoint_record as records
from mltrain.endpoints.deployment_env import interpreter_for
from mltrain.endpoints.endpoint_record import LOG_FILE, DeploymentRecord, EndpointError, EndpointRecord

if TYPE_CHECKING:
    from mltrain.environments.spec import EnvironmentSpec

Log = Callable[[str], None]


@dataclass
class EndpointSpec:
    name: str
    auth_mode: str = "key"
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port, kept for the endpoint's life
    description: str = ""
    tags: Dict[str, str] = field(default_factory=dict)
    kind: str = "managed"
    cloud_settings: Dict[str, Any] = field(default_factory=dict)
    traffic: Optional[Dict[str, int]] = None


@dataclass
class DeploymentSpec:
    name: str
    endpoint: str
    models: List[Any] = field(default_factory=list)  # mltrain.models.registry.Model versions
    scoring_script: Optional[str] = None  # relative to code_dir, or absolute; None: an MLflow model
    code_dir: Optional[str] = None
    environment: Optional[EnvironmentSpec] = None  # None: mltrain's own interpreter
    instance_count: int = 1
    request_timeout_ms: int = 5000
    max_concurrent_requests_per_instance: int = 1
    environment_variables: Dict[str, str] = field(default_factory=dict)
    cloud_settings: Dict[str, Any] = field(default_factory=dict)
    ready_timeout_s: float = 600.0
    description: str = ""
    tags: Dict[str, str] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------ endpoints
def create_or_update_endpoint(spec: EndpointSpec) -> EndpointRecord:
    records.check_name(spec.name)
    if spec.auth_mode not in records.AUTH_MODES:
        raise EndpointError(f"endpoint {spec.name}: auth_mode '{spec.auth_mode}' is not one of {', '.join(records.AUTH_MODES)}")
    with records.locked(spec.name):
        if records.exists(spec.name):
            record = records.load_endpoint(spec.name)
            if spec.port and spec.port != record.port:
                raise EndpointError(f"endpoint {spec.name} listens on port {record.port}; its port cannot change "
                                    "(delete it and create it again)")
            record.description = spec.description or record.description
            record.tags.update(spec.tags)
            record.cloud_settings.update(spec.cloud_settings)
            if spec.auth_mode != record.auth_mode:
                record.auth_mode = spec.auth_mode
                if spec.auth_mode != "none" and not records.load_keys(spec.name):
                    records.make_keys(spec.name)
        else:
            if spec.port:
                endpoint_port.check(spec.host, spec.port, spec.name)
            port = spec.port or endpoint_port.draw(spec.host)  # drawn: already free and no other endpoint's
            record = EndpointRecord(name=spec.name, auth_mode=spec.auth_mode, host=spec.host, port=port,
                                    description=spec.description, tags=dict(spec.tags), kind=spec.kind,
                                    cloud_settings=dict(spec.cloud_settings), created=time.time())
            if spec.auth_mode != "none":
                records.make_keys(spec.name)
        if spec.traffic is not None:
            record.traffic = _checked_traffic(record, spec.traffic)
        records.save_endpoint(record)
    if spec.traffic is not None:
        _rebalanced(record)
    return record


def set_traffic(name: str, traffic: Dict[str, int]) -> EndpointRecord:
    with records.locked(name):
        record = records.load_endpoint(name)
        record.traffic = _checked_traffic(record, traffic)
        records.save_endpoint(record)
    _rebalanced(record)
    return record


def _rebalanced(record: EndpointRecord, besides: Optional[str] = None) -> None:
    """Returns once the deployments' sockets on the endpoint's port follow its traffic rule (balance.py); not
    waiting for `besides` (a deployment just made: its workers read the rule as they start)."""
    masters = {}
    for name in records.deployment_names(record.name):
        if name == besides:
            continue
        pid = records.load_deployment(record.name, name).pid
        if pid is not None and server_process.is_server(pid):
            masters[name] = pid
    if masters:
        balance.wait_balanced(records.endpoint_dir(record.name), record.port, masters)


def _checked_traffic(record: EndpointRecord, traffic: Dict[str, int]) -> Dict[str, int]:
    known = records.deployment_names(record.name)
    out: Dict[str, int] = {}
    for name, share in traffic.items():
        if name not in known:
            raise EndpointError(f"endpoint {record.name}: traffic names deployment '{name}', which it does not have "
                                f"(its deployments: {', '.join(known) or 'none'})")
        try:
            value = int(share)
        except (TypeError, ValueError):
            raise EndpointError(f"endpoint {record.name}: traffic for '{name}' is {share!r}; give a whole "
                                "percentage from 0 to 100") from None
        if not 0 <= value <= 100:
            raise EndpointError(f"endpoint {record.name}: traffic for '{name}' is {value}; give 0 to 100")
        out[name] = value
    total = sum(out.values())
    if out and total not in (0, 100):
        raise EndpointError(f"endpoint {record.name}: traffic adds up to {total}; the shares must add up to 100 "
                            "(or all be 0)")
    return out


def delete_endpoint(name: str) -> None:
    with records.locked(name):
        records.load_endpoint(name)
        for deployment in records.deployment_names(name):
            server_process.stop(records.load_deployment(name, deployment))
    shutil.rmtree(records.endpoint_dir(name), ignore_errors=True)


def get_keys(name: str) -> Dict[str, str]:
    record = records.load_endpoint(name)
    if record.auth_mode == "none":
        raise EndpointError(f"endpoint {name} has auth_mode none: it takes requests without a key")
    return records.load_keys(name)


def regenerate_keys(name: str) -> Dict[str, str]:
    with records.locked(name):
        records.load_endpoint(name)
        return records.make_keys(name)


# ---------------------------------------------------------------------------------------------- deployments
def deploy(spec: DeploymentSpec, log: Log = print, stop: Optional[threading.Event] = None) -> DeploymentRecord:
    """Create or update a deployment: its server is ready when this returns (or it raised, and nothing of the
    new server is left running). Interrupted before its server is ready (`stop` set, as `mltrain endpoints
    deploy` sets it on Ctrl-C or SIGTERM: DeployInterrupted; or KeyboardInterrupt in the caller's process, raised
    on), the new server is stopped and the records are left as they were: no deployment, or the previous one."""
    records.check_name(spec.name, "deployment")
    endpoint = records.load_endpoint(spec.endpoint)
    code_dir, script = _scoring_script(spec)
    if spec.instance_count < 1:
        raise EndpointError(f"deployment {spec.name}: instance_count is {spec.instance_count}; give 1 or more")
    try:
        interpreter, environment = interpreter_for(spec, log, stop)
        inference_server.ensure_layer(log)  # its pip, in the command's process group, ends at a Ctrl-C too
    except MltrainError:
        if stop is not None and stop.is_set():
            raise _interrupted(spec) from None
        raise
    with records.locked(spec.endpoint):
        if stop is not None and stop.is_set():
            raise _interrupted(spec)
        previous = records.load_deployment(spec.endpoint, spec.name) if spec.name in records.deployment_names(spec.endpoint) else None
        folder = records.deployment_dir(spec.endpoint, spec.name)
        folder.mkdir(parents=True, exist_ok=True)
        record = DeploymentRecord(
            name=spec.name, endpoint=spec.endpoint, scoring_script=script, code_dir=code_dir,
            models=[models_dir.describe(m) for m in spec.models], environment=environment, interpreter=interpreter,
            instance_count=spec.instance_count, request_timeout_ms=spec.request_timeout_ms,
            max_concurrent_requests_per_instance=spec.max_concurrent_requests_per_instance,
            environment_variables=dict(spec.environment_variables), port=endpoint_port.os_port("127.0.0.1"),
            cloud_settings=dict(spec.cloud_settings), started=time.time(), description=spec.description,
            tags=dict(spec.tags))
        models_root = folder / f"azureml-models.{int(time.time() * 1000)}"  # this generation's: a new folder
        proc: Optional[subprocess.Popen[bytes]] = None
        try:
            record.model_dir = str(models_dir.lay_out(models_root, spec.models))
            if previous is None:
                endpoint_port.check(endpoint.host, endpoint.port, endpoint.name)
            records.save_deployment(record)
            proc = server_process.start(record, endpoint, folder)
            record.pid = proc.pid
            records.save_deployment(record)
        except BaseException:  # a refusal, or Ctrl-C in the caller's process: no half-made deployment is kept
            _withdraw(record, proc, previous, models_root)
            raise
    assert proc is not None
    try:
        error = server_process.wait_ready(record, proc, spec.ready_timeout_s, stop)
    except BaseException as exc:  # interrupted: `stop` set, or KeyboardInterrupt in the caller's process
        with records.locked(spec.endpoint):
            _withdraw(record, proc, previous, models_root)
        if isinstance(exc, server_process.Stopped):
            raise _interrupted(spec, previous) from None
        raise
    with records.locked(spec.endpoint):
        if error is not None:
            server_process.stop(record, proc)
            record.state, record.error, record.pid = "Failed", error, None
            if previous is not None:  # the old server keeps serving, as Azure keeps the old version on a failed update
                records.save_deployment(previous)
            else:
                records.save_deployment(record)
            raise EndpointError(f"deployment {spec.name} of endpoint {spec.endpoint} failed: {error} "
                                f"(its log: {folder / LOG_FILE})")
        record.state, record.ready_s = "Succeeded", round(time.time() - record.started, 3)
        records.save_deployment(record)
        current = records.load_endpoint(spec.endpoint)
        current.routes[spec.name] = record.port
        if not current.traffic and previous is None and len(records.deployment_names(spec.endpoint)) == 1:
            current.traffic = {spec.name: 100}  # the first deployment takes the traffic, as `az ml` does locally
        current.traffic.setdefault(spec.name, 0)
        records.save_endpoint(current)
    if previous is not None:
        server_process.stop(previous)
        _remove_old_models(folder, Path(record.model_dir))
    # The others' shares of sockets change with this one's worker count. Its own workers are not waited for: as
    # before, `deploy` returns once one of them answers (the others still starting open theirs as they start).
    _rebalanced(current, besides=spec.name)
    log(f"deployment {spec.name} of endpoint {spec.endpoint} is ready ({record.ready_s:.1f} s): {endpoint.scoring_uri}")
    return record


class DeployInterrupted(EndpointError):
    """`deploy` was stopped before its server was ready; nothing of it is left. Exit status 130, as a shell
    reports SIGINT (and as a run's driver ends when canceled by SIGINT or SIGTERM)."""

    exit_code = 130


def _interrupted(spec: DeploymentSpec, previous: Optional[DeploymentRecord] = None) -> DeployInterrupted:
    if previous is None and spec.name not in records.deployment_names(spec.endpoint):
        return DeployInterrupted(f"interrupted; deployment {spec.name} of endpoint {spec.endpoint} not created")
    return DeployInterrupted(f"interrupted; deployment {spec.name} of endpoint {spec.endpoint} not updated "
                             "(it is as it was)")


def _withdraw(record: DeploymentRecord, proc: Optional[subprocess.Popen[bytes]], previous: Optional[DeploymentRecord],
              models_root: Path) -> None:
    """Undo a deployment that never became ready (called under the endpoint's lock): its new server's whole
    group stopped, its record and models gone, the previous record back. The endpoint's record (traffic,
    routes) was not changed yet: it names the new server only once it is ready."""
    if proc is not None:
        server_process.stop(record, proc)
    if previous is None:
        shutil.rmtree(records.deployment_dir(record.endpoint, record.name), ignore_errors=True)
        return
    records.save_deployment(previous)
    shutil.rmtree(models_root, ignore_errors=True)


def restart(endpoint: str, name: str, log: Log = print, stop: Optional[threading.Event] = None) -> DeploymentRecord:
    """Start a deployment again from its record (after a reboot, or its server killed): the same models,
    scoring script, environment and settings, as an update would."""
    # kept off `endpoints create` and `deploy` (the environments package: about 30 ms of imports)
    from mltrain.environments.spec import EnvironmentSpec  # startup
    from mltrain.models.registry import Model  # heavy

    record = records.load_deployment(endpoint, name)
    environment = None if record.environment.get("name", "current") == "current" and len(record.environment) == 1 \
        else EnvironmentSpec(**record.environment)
    spec = DeploymentSpec(name=name, endpoint=endpoint, models=[Model(m["name"], int(m["version"])) for m in record.models],
                          scoring_script=record.scoring_script, code_dir=record.code_dir, environment=environment,
                          instance_count=record.instance_count, request_timeout_ms=record.request_timeout_ms,
                          max_concurrent_requests_per_instance=record.max_concurrent_requests_per_instance,
                          environment_variables=dict(record.environment_variables),
                          cloud_settings=dict(record.cloud_settings), description=record.description,
                          tags=dict(record.tags))
    return deploy(spec, log, stop)


def delete_deployment(endpoint: str, name: str) -> None:
    with records.locked(endpoint):
        record = records.load_endpoint(endpoint)
        deployment = records.load_deployment(endpoint, name)
        if record.traffic.get(name, 0) > 0 and sum(1 for v in record.traffic.values() if v > 0) > 1:
            raise EndpointError(f"deployment {name} takes {record.traffic[name]}% of endpoint {endpoint}'s traffic; "
                                "give its share to the others first")
        record.traffic.pop(name, None)
        record.routes.pop(name, None)
        records.save_endpoint(record)
        server_process.stop(deployment)
        shutil.rmtree(records.deployment_dir(endpoint, name), ignore_errors=True)
    _rebalanced(record)  # the last share gone: the others listen with one socket each again


def deployment_state(record: DeploymentRecord) -> Tuple[str, Optional[str]]:
    """(state, why): what the record says, corrected by whether its server still runs."""
    if record.state == "Succeeded" and (record.pid is None or not server_process.is_server(record.pid)):
        return "Failed", f"its server (pid {record.pid}) is not running: it was stopped or killed outside mltrain"
    return record.state, record.error


def logs(endpoint: str, name: str, lines: Optional[int] = None) -> str:
    records.load_deployment(endpoint, name)
    path = records.deployment_dir(endpoint, name) / LOG_FILE
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:]) + "\n" if lines else text


def invoke(endpoint: str, body: bytes, deployment: Optional[str] = None, path: str = "/score",
           content_type: str = "application/json", timeout_s: float = 300.0) -> Tuple[int, bytes]:
    """One request to the endpoint, with its key: (HTTP status, body)."""
    record = records.load_endpoint(endpoint)
    headers = {"Content-Type": content_type}
    if record.auth_mode != "none":
        headers["Authorization"] = f"Bearer {records.load_keys(endpoint).get('primaryKey', '')}"
    if deployment is not None:
        records.load_deployment(endpoint, deployment)
        headers["azureml-model-deployment"] = deployment
    # kept off `endpoints create` and `deploy`: about 28 ms with the ssl and email modules it loads
    import http.client  # startup

    host = "127.0.0.1" if record.host in ("0.0.0.0", "::") else record.host
    connection = http.client.HTTPConnection(host, record.port, timeout=timeout_s)
    try:
        connection.request("POST", path, body=body, headers=headers)
        answer = connection.getresponse()
        return answer.status, answer.read()
    except OSError as exc:
        raise EndpointError(f"endpoint {endpoint} did not answer at {record.scoring_uri}: {exc}") from None
    finally:
        connection.close()


def names() -> List[str]:
    return records.list_names()


# -------------------------------------------------------------------------------------------------- helpers
def _scoring_script(spec: DeploymentSpec) -> Tuple[Optional[str], Optional[str]]:
    code = Path(spec.code_dir).expanduser().resolve() if spec.code_dir else None
    if code is not None and not code.is_dir():
        raise EndpointError(f"deployment {spec.name}: code folder {spec.code_dir} does not exist")
    if spec.scoring_script is None:
        if not any(models_dir.is_mlflow(m) for m in spec.models):
            raise EndpointError(f"deployment {spec.name}: no scoring script; give one (code_configuration."
                                "scoring_script, InferenceConfig(entry_script=...)) or deploy an MLflow model")
        return str(code) if code else None, str(Path(__file__).with_name("mlflow_score.py"))
    script = Path(spec.scoring_script).expanduser()
    if not script.is_absolute():
        script = (code or Path.cwd()) / script
    if not script.is_file():
        raise EndpointError(f"deployment {spec.name}: scoring script {script} does not exist")
    return str(code or script.parent.resolve()), str(script.resolve())


def _remove_old_models(folder: Path, keep: Path) -> None:
    for old in folder.glob("azureml-models.*"):
        if old.resolve() != keep.resolve():
            shutil.rmtree(old, ignore_errors=True)
