"""azure-ai-ml's online endpoints on mltrain: scripts written as Azure's endpoint notebooks write them
(`ManagedOnlineEndpoint`, `ManagedOnlineDeployment` with `Model(path=...)`, `CodeConfiguration`, an `Environment`,
`endpoint.traffic = {...}`, `invoke(request_file=...)`), run unmodified with MLTRAIN_AZUREML=1 in real processes,
and checked from outside as well: the answers, the traffic split counted over many requests, the key, a killed
server, a failing init(), and that a deleted endpoint leaves nothing listening."""
from __future__ import annotations

import json

import pytest
from test_azureml_sdk_v2 import run_script, value
from test_azureml_v2 import write

pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
pytestmark = pytest.mark.slow

SCORE = """\
import json, os
def init():
    global model
    with open(os.path.join(os.environ["AZUREML_MODEL_DIR"], "model.json")) as f:
        model = json.load(f)
    print("init ran for", model["who"], os.environ.get("GREETING"), flush=True)
def run(raw_data):
    rows = json.loads(raw_data)["data"]
    return {"who": model["who"], "answer": [sum(row) * model["scale"] for row in rows]}
"""

HEADER = """\
import collections, http.client, json, os, signal, socket, time
from azure.ai.ml import MLClient
from azure.ai.ml.constants import AssetTypes
from azure.ai.ml.entities import (BatchEndpoint, CodeConfiguration, Environment, ManagedOnlineDeployment,
                                  ManagedOnlineEndpoint, Model, OnlineRequestSettings)
from azure.ai.ml.exceptions import DeploymentException, ValidationException
from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "00000000-0000-0000-0000-000000000000", "rg", "ws")


def post(uri, headers):
    host, port = uri.split("//")[1].split("/")[0].split(":")
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request("POST", "/score", open("request.json", "rb").read(), {"Content-Type": "application/json", **headers})
    r = c.getresponse()
    return r.status, r.read().decode()


def refused(uri):
    # nothing of the endpoint listens on its port: the connection is refused, or (the port is outside the
    # ephemeral range, but another test's server can draw it once it is free) whatever took it is not a
    # server of this MLTRAIN_HOME's
    host, port = uri.split("//")[1].split("/")[0].split(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ConnectionRefusedError:
        return True
    import psutil

    def ours(pid):
        try:
            return psutil.Process(pid).environ().get("MLTRAIN_HOME") == os.environ["MLTRAIN_HOME"]
        except psutil.Error:  # it has ended since
            return False

    listeners = [c.pid for c in psutil.net_connections("tcp") if c.laddr.port == int(port) and c.status == "LISTEN"]
    return not any(ours(pid) for pid in listeners if pid)
"""

ROLLOUT = HEADER + """
endpoint = ManagedOnlineEndpoint(name="rollout-ep", description="blue and green", auth_mode="key", tags={"foo": "bar"})
made = ml_client.online_endpoints.begin_create_or_update(endpoint).result()
print("MADE", type(made).__name__, made.provisioning_state, made.auth_mode, made.scoring_uri.endswith("/score"))
blue = ManagedOnlineDeployment(
    name="blue", endpoint_name="rollout-ep", model=Model(path="blue/model.json"),
    code_configuration=CodeConfiguration(code="./code", scoring_script="score.py"),
    environment="azureml:local-env@latest", instance_type="Standard_DS3_v2", instance_count=1,
    request_settings=OnlineRequestSettings(request_timeout_ms=3000, max_concurrent_requests_per_instance=2),
    environment_variables={"GREETING": "hello"})
poller = ml_client.online_deployments.begin_create_or_update(blue)
print("BLUE", poller.done(), poller.status(), poller.result().provisioning_state)
print("ANSWER", ml_client.online_endpoints.invoke(endpoint_name="rollout-ep", request_file="request.json"))
print("LOGS", "init ran for blue hello" in ml_client.online_deployments.get_logs(name="blue", endpoint_name="rollout-ep", lines=50))
got = ml_client.online_endpoints.get(name="rollout-ep")
print("GOT", json.dumps(got.traffic), got.provisioning_state, got.tags["foo"], got.openapi_uri.endswith("/swagger.json"))
dep = ml_client.online_deployments.get(name="blue", endpoint_name="rollout-ep")
print("DEP", dep.provisioning_state, dep.model, dep.instance_type, dep.request_settings.request_timeout_ms,
      dep.environment.name, dep.code_configuration.scoring_script, dep.environment_variables["GREETING"])

green = ManagedOnlineDeployment(
    name="green", endpoint_name="rollout-ep", model=Model(path="green/model.json"),
    code_configuration=CodeConfiguration(code="./code", scoring_script="score.py"),
    environment=Environment(conda_file="conda.yaml", image="mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest"))
ml_client.begin_create_or_update(green).result()
print("LISTED", [e.name for e in ml_client.online_endpoints.list()],
      [d.name for d in ml_client.online_deployments.list("rollout-ep")])


def answers(n=200, **kwargs):
    return dict(collections.Counter(json.loads(ml_client.online_endpoints.invoke(
        endpoint_name="rollout-ep", request_file="request.json", **kwargs))["who"] for _ in range(n)))


endpoint.traffic = {"blue": 100, "green": 0}
ml_client.online_endpoints.begin_create_or_update(endpoint).result()
print("SPLIT100", json.dumps(answers()))
endpoint.traffic = {"blue": 50, "green": 50}
ml_client.begin_create_or_update(endpoint).result()
print("SPLIT50", json.dumps(answers()))
print("GREEN", json.dumps(answers(20, deployment_name="green")))
print("TRAFFIC", json.dumps(ml_client.online_endpoints.get("rollout-ep").traffic))

keys = ml_client.online_endpoints.get_keys("rollout-ep")
uri = ml_client.online_endpoints.get("rollout-ep").scoring_uri
print("KEYS", type(keys).__name__, post(uri, {})[0], post(uri, {"Authorization": "Bearer " + keys.primary_key})[0],
      post(uri, {"Authorization": "Bearer " + keys.secondary_key})[0])
ml_client.online_endpoints.begin_regenerate_keys("rollout-ep", key_type="primary").result()
fresh = ml_client.online_endpoints.get_keys("rollout-ep")
print("ROTATED", post(uri, {"Authorization": "Bearer " + keys.primary_key})[0],
      post(uri, {"Authorization": "Bearer " + keys.secondary_key})[0], fresh.secondary_key == keys.secondary_key,
      post(uri, {"Authorization": "Bearer " + fresh.primary_key})[0])

blue = ml_client.online_deployments.get(name="blue", endpoint_name="rollout-ep")
blue.instance_count = 2
scaled = ml_client.online_deployments.begin_create_or_update(blue).result()
print("SCALED", scaled.instance_count, scaled.provisioning_state, scaled.model, json.dumps(answers(10, deployment_name="blue")))

pid = json.load(open(os.path.join(os.environ["MLTRAIN_HOME"], "endpoints/rollout-ep/deployments/green/deployment.json")))["pid"]
os.killpg(pid, signal.SIGKILL)
deadline = time.time() + 20
while ml_client.online_deployments.get(name="green", endpoint_name="rollout-ep").provisioning_state != "Failed":
    assert time.time() < deadline, "a killed server still reads as running"
    time.sleep(0.1)
print("KILLED", ml_client.online_deployments.get(name="green", endpoint_name="rollout-ep").provisioning_state)
endpoint.traffic = {"blue": 100, "green": 0}
ml_client.begin_create_or_update(endpoint).result()
ml_client.online_deployments.begin_delete(name="green", endpoint_name="rollout-ep").wait()
print("AFTER", [d.name for d in ml_client.online_deployments.list("rollout-ep")])
ml_client.online_endpoints.begin_delete(name="rollout-ep")
print("DELETED", refused(uri), [e.name for e in ml_client.online_endpoints.list()])
try:
    ml_client.online_endpoints.get("rollout-ep")
except ResourceNotFoundError as exc:
    print("GONE", type(exc).__name__)
"""

FAILING = HEADER + """
ml_client.online_endpoints.begin_create_or_update(ManagedOnlineEndpoint(name="fail-ep")).result()
bad = ManagedOnlineDeployment(name="bad", endpoint_name="fail-ep", model=Model(path="blue/model.json"),
                              code_configuration=CodeConfiguration(code="./bad", scoring_script="score.py"))
try:
    ml_client.online_deployments.begin_create_or_update(bad).result()
except DeploymentException as exc:
    print("FAILED", str(exc).replace(chr(10), " | "))
print("STATE", ml_client.online_deployments.get(name="bad", endpoint_name="fail-ep").provisioning_state,
      refused(ml_client.online_endpoints.get("fail-ep").scoring_uri))
for call in (lambda: ml_client.batch_endpoints.begin_create_or_update(BatchEndpoint(name="batch-ep")),
             lambda: ml_client.begin_create_or_update(BatchEndpoint(name="batch-ep")),
             lambda: ml_client.online_endpoints.begin_create_or_update(ManagedOnlineEndpoint(name="aad-ep", auth_mode="aad_token")),
             lambda: ml_client.online_deployments.begin_create_or_update(ManagedOnlineDeployment(
                 name="x", endpoint_name="fail-ep", model="azureml:no-such-model:1",
                 code_configuration=CodeConfiguration(code="./code", scoring_script="score.py"))),
             lambda: ml_client.online_deployments.begin_create_or_update(ManagedOnlineDeployment(
                 name="triton", endpoint_name="fail-ep", model=Model(path="blue", type=AssetTypes.TRITON_MODEL))),
             lambda: ml_client.models.package("some-model", "1", None)):
    try:
        call()
    except ValidationException as exc:
        print("REFUSED", str(exc).replace(chr(10), " | "))
try:
    ml_client.online_endpoints.invoke(endpoint_name="no-such-ep", request_file="request.json")
except ResourceNotFoundError as exc:
    print("NOTFOUND", exc.message)
ml_client.online_endpoints.begin_delete(name="fail-ep").result()
print("LEFT", [e.name for e in ml_client.online_endpoints.list()])
"""

MLFLOW = HEADER + """
import mlflow.sklearn, pandas as pd
from sklearn.linear_model import LinearRegression

X = pd.DataFrame({"a": [1.0, 2.0, 3.0, 0.0], "b": [2.0, 1.0, 3.0, 1.0]})
mlflow.sklearn.save_model(LinearRegression().fit(X, 2 * X["a"] + 3 * X["b"] + 1), "mlflow-model",
                          pip_requirements=["scikit-learn"])  # (MLflow would otherwise run a process to infer them)
endpoint = ManagedOnlineEndpoint(name="mlflow-ep", auth_mode="key")
local = ml_client.online_endpoints.begin_create_or_update(endpoint, local=True)
print("LOCAL", type(local).__name__)
model = Model(path="mlflow-model", type=AssetTypes.MLFLOW_MODEL, name="linear", description="an MLflow model")
deployment = ManagedOnlineDeployment(name="blue", endpoint_name="mlflow-ep", model=model, instance_type="Standard_F4s_v2")
print("DEPLOYED", ml_client.online_deployments.begin_create_or_update(deployment, local=True).provisioning_state)
print("ANSWER", ml_client.online_endpoints.invoke(endpoint_name="mlflow-ep", request_file="mlflow-request.json", local=True))
print("MODEL", ml_client.online_deployments.get(name="blue", endpoint_name="mlflow-ep").model,
      ml_client.online_deployments.get(name="blue", endpoint_name="mlflow-ep").code_configuration)
print("DELETED", ml_client.online_endpoints.begin_delete(name="mlflow-ep", local=True))
"""


@pytest.fixture
def workspace(home, project, server_layer):
    """A project with two models' files, a scoring script, a request, a conda file and a workspace environment;
    every endpoint a test leaves is deleted after it (its servers stopped)."""
    (home / "servers").mkdir()
    (home / "servers" / server_layer.name).symlink_to(server_layer)
    write(project, "code/score.py", SCORE)
    write(project, "bad/score.py", "def init():\n    raise ValueError('the model file is corrupt')\n"
                                   "def run(raw_data):\n    return raw_data\n")
    write(project, "blue/model.json", json.dumps({"who": "blue", "scale": 1}))
    write(project, "green/model.json", json.dumps({"who": "green", "scale": 2}))
    write(project, "request.json", json.dumps({"data": [[1, 2, 3], [4, 5, 6]]}))
    write(project, "mlflow-request.json", json.dumps(
        {"input_data": {"columns": ["a", "b"], "index": [0, 1], "data": [[1.0, 1.0], [2.0, 0.0]]}}))
    write(project, "conda.yaml", "name: green-env\nchannels: [conda-forge]\ndependencies:\n  - python=3.11\n"
                                 "  - pip:\n    - numpy\n    - azureml-defaults\n"
                                 "    - inference-schema[numpy-support]==1.5.1\n")  # Azure's model-1 pin: not on PyPI now
    write(project, ".mltrain/environment/local-env.yaml", "name: local-env\npython:\n  user_managed: true\n")
    yield project
    from mltrain.endpoints import serving

    for name in serving.names():
        serving.delete_endpoint(name)


def test_blue_green_rollout_from_azures_entities(workspace, home):
    write(workspace, "rollout.py", ROLLOUT)
    p = run_script(workspace, "rollout.py", timeout=300)
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-3000:]
    assert value(out, "MADE") == "ManagedOnlineEndpoint Succeeded key True"
    assert value(out, "BLUE") == "True Succeeded Succeeded"
    assert json.loads(value(out, "ANSWER")) == {"who": "blue", "answer": [6, 15]}  # the scoring script's own answer
    assert value(out, "LOGS") == "True"
    assert value(out, "GOT") == '{"blue": 100} Succeeded bar True'  # the first deployment takes the traffic
    # the model registered under the deployment's name; the cloud-only instance type kept and said once
    assert value(out, "DEP") == "Succeeded azureml:rollout-ep-blue:1 Standard_DS3_v2 3000 local-env score.py hello"
    assert out.count("note: deployment blue: instance_type: Azure's cloud settings, kept on the record") == 1
    assert "image mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest is one of Azure ML's base images" in out
    assert "building environment green-env" in out
    assert ("note: deployment green: not installing the environment's inference-schema[numpy-support]==1.5.1: Azure's "
            "inference server brings inference-schema==1.8, first on the server's path") in out
    assert value(out, "LISTED") == "['rollout-ep'] ['blue', 'green']"
    assert json.loads(value(out, "SPLIT100")) == {"blue": 200}
    split = json.loads(value(out, "SPLIT50"))
    assert set(split) == {"blue", "green"} and 60 <= split["green"] <= 140, split  # ~100 each (p < 1e-8 outside)
    assert json.loads(value(out, "GREEN")) == {"green": 20}
    assert json.loads(value(out, "TRAFFIC")) == {"blue": 50, "green": 50}
    assert value(out, "KEYS") == "EndpointAuthKeys 401 200 200"
    assert value(out, "ROTATED") == "401 200 True 200"  # the old primary refused; the secondary kept working
    assert value(out, "SCALED") == '2 Succeeded azureml:rollout-ep-blue:1 {"blue": 10}'  # no new model version
    assert value(out, "KILLED") == "Failed"
    assert value(out, "AFTER") == "['blue']"
    assert value(out, "DELETED") == "True []" and value(out, "GONE") == "ResourceNotFoundError"
    assert not (home / "endpoints" / "rollout-ep").exists()


def test_failing_init_refusals_and_not_found(workspace):
    write(workspace, "failing.py", FAILING)
    p = run_script(workspace, "failing.py", timeout=180)
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-3000:]
    failed = value(out, "FAILED")
    assert failed.startswith("deployment bad of endpoint fail-ep failed: ValueError: the model file is corrupt")
    assert " | " not in failed  # one line
    assert value(out, "STATE") == "Failed True"  # nothing listens on the endpoint's port
    refusals = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("REFUSED ")]
    assert refusals[0].startswith("ml_client.batch_endpoints.begin_create_or_update: batch endpoints are Azure's "
                                  "service; mltrain scores batches as a parallel job: `mltrain job create")
    assert refusals[1].startswith("BatchEndpoint: batch endpoints are Azure's service")
    assert refusals[2].startswith("endpoint aad-ep: auth_mode aad_token needs Microsoft Entra ID")
    assert refusals[3].startswith("deployment x: model: no model 'no-such-model' in the registry")
    assert refusals[4].startswith("deployment triton: a Triton model without a scoring script is served by NVIDIA's")
    assert refusals[5].startswith("ml_client.models.package(some-model, 1): a model package is a container image Azure")
    assert len(refusals) == 6 and all(" | " not in line for line in refusals)
    assert "Online endpoint no-such-ep not found" in value(out, "NOTFOUND")
    assert value(out, "LEFT") == "[]"


def test_an_mlflow_model_is_served_without_a_scoring_script(workspace):
    write(workspace, "mlflow_model.py", MLFLOW)
    p = run_script(workspace, "mlflow_model.py", timeout=300)
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-3000:]
    assert value(out, "LOCAL") == "ManagedOnlineEndpoint"  # local=True returns the entity, as Azure's local calls do
    assert out.count("note: local=True: Azure runs a local endpoint in Docker") == 1
    assert value(out, "DEPLOYED") == "Succeeded"
    assert json.loads(value(out, "ANSWER")) == pytest.approx([6.0, 5.0])  # 2a + 3b + 1
    assert value(out, "MODEL") == "azureml:linear:1 None"
    # no environment given: the model's own conda.yaml is built, as Azure builds an MLflow model's
    assert "model linear:1's own conda.yaml is built" in out and "building environment mlflow-linear-1" in out
    assert value(out, "DELETED") == "None"

