"""Azure ML SDK v1 deployment run unmodified: `InferenceConfig`, `AciWebservice` / `AksWebservice` /
`LocalWebservice.deploy_configuration`, `Model.deploy`, and the service's wait_for_deployment, state, run,
get_logs, keys, update and delete, each in a user's `control.py` (as tests/test_azureml_v1.py runs them), served
by mltrain's endpoint engine: Azure's inference server in a process of its own, checked from outside as a user
would (a raw request, the port, a second process, a killed server). The scoring scripts and models are made
here."""
from __future__ import annotations

import json
import os
import pickle
import signal
import socket
import subprocess
import sys

import pytest
from support import free_port, pid_alive, until
from test_azureml_v1 import control, make_workspace

SCORE = """\
import json, os, pickle
from azureml.core.model import Model

def init():
    global factor, path
    path = Model.get_model_path("triple")
    factor = pickle.load(open(os.path.join(os.environ["AZUREML_MODEL_DIR"], "model.pkl"), "rb"))["factor"]

def run(input_data):
    return {"answer": [x * factor for x in json.loads(input_data)["data"]], "path": path, "who": "%s"}
"""

# two models: AZUREML_MODEL_DIR holds <name>/<version>/<file> for each
SCORE_TWO = """\
import json, os, pickle
from azureml.core.model import Model

def init():
    global paths, factors
    paths = {name: Model.get_model_path(name) for name in ("triple", "double")}
    factors = {name: pickle.load(open(p, "rb"))["factor"] for name, p in paths.items()}

def run(input_data):
    x = json.loads(input_data)["data"][0]
    return {"answers": {name: x * f for name, f in factors.items()}, "paths": paths,
            "model_dir": os.environ["AZUREML_MODEL_DIR"]}
"""

SETUP = """\
import json, os, time
from azureml.core import Workspace, Model
from azureml.core.model import InferenceConfig
from azureml.core.webservice import AciWebservice, AksWebservice, LocalWebservice, Webservice
from azureml.exceptions import WebserviceException

ws = Workspace.from_config()
"""


@pytest.fixture
def ws(project, home, server_layer):
    (home / "servers").mkdir()
    (home / "servers" / server_layer.name).symlink_to(server_layer)
    workspace = make_workspace(project)
    for name, factor in (("triple", 3), ("double", 2)):
        folder = workspace / name
        folder.mkdir()
        with open(folder / "model.pkl", "wb") as f:
            pickle.dump({"factor": factor}, f)
    (workspace / "score.py").write_text(SCORE % "first")
    yield workspace
    subprocess.run([sys.executable, "-c", "from mltrain.endpoints import serving\n"
                    "for name in serving.names():\n    serving.delete_endpoint(name)"],
                   env=dict(os.environ), timeout=60, check=False)


def _lines(out: subprocess.CompletedProcess, prefix: str) -> list:
    return [line[len(prefix):].strip() for line in out.stdout.splitlines() if line.startswith(prefix)]


def _value(out: subprocess.CompletedProcess, prefix: str):
    found = _lines(out, prefix)
    assert found, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(found[-1])


def _port(uri: str) -> int:
    return int(uri.rsplit(":", 1)[1].split("/")[0])


def _refused(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _post(port: int, headers: dict) -> int:
    import http.client

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", "/score", b'{"data": [1]}', {"Content-Type": "application/json", **headers})
        return c.getresponse().status
    finally:
        c.close()


def test_the_notebook_flow_a_second_process_an_update_to_two_models_and_delete(ws, home):
    """Azure's deploy cells (InferenceConfig, AciWebservice.deploy_configuration, Model.deploy, wait, state,
    get_logs, scoring_uri, run, delete), a second process finding the service, and update() to new code
    and two models (the several-models layout)."""
    out = control(ws, SETUP + """\
model = Model.register(ws, model_path="triple/model.pkl", model_name="triple")
Model.register(ws, model_path="double/model.pkl", model_name="double")
inference_config = InferenceConfig(entry_script="score.py")
aciconfig = AciWebservice.deploy_configuration(cpu_cores=2, memory_gb=2, tags={'data': 'numbers'},
                                               description='Triple numbers', enable_app_insights=True)
service = Model.deploy(workspace=ws, name='aci-triple', models=[model], inference_config=inference_config,
                       deployment_config=aciconfig)
service.wait_for_deployment(True)
print("STATE", json.dumps([service.state, type(service).__name__, service.compute_type, service.auth_enabled]))
print("URI", json.dumps(service.scoring_uri))
print("RUN", json.dumps(service.run(input_data=json.dumps({'data': [1, 2]}))))
print("LOGS", json.dumps("POST /score 200" in service.get_logs()))
print("SERIAL", json.dumps(service.serialize(), default=str))
try:
    Model.deploy(ws, 'aci-triple', [model], inference_config, aciconfig)
except WebserviceException as exc:
    print("EXISTS", json.dumps(str(exc)))
try:
    service.get_keys()
except WebserviceException as exc:
    print("NOKEYS", json.dumps(str(exc)))
""")
    notes = [line for line in out.stdout.splitlines() if line.startswith("note:")]
    assert notes == ["note: service aci-triple runs on this machine; kept in its record, not applied here: cpu_cores=2, "
                     "memory_gb=2, enable_app_insights=True"], out.stdout
    assert _value(out, "STATE") == ["Healthy", "AciWebservice", "ACI", False]
    port = _port(_value(out, "URI"))
    answer = _value(out, "RUN")
    model_dir = json.loads((home / "endpoints" / "aci-triple" / "deployments" / "default" / "deployment.json")
                           .read_text())["model_dir"]
    # one model: get_model_path is $AZUREML_MODEL_DIR/<the registered file's name>, as Azure's
    assert answer == {"answer": [3, 6], "path": os.path.join(model_dir, "model.pkl"), "who": "first"}
    assert _value(out, "LOGS") is True
    serial = _value(out, "SERIAL")
    assert serial["state"] == "Healthy" and serial["tags"] == {"data": "numbers"} and serial["models"] == ["triple:1"]
    assert serial["containerResourceRequirements"] == {"cpu": 2, "memoryInGB": 2}
    assert "already a service with name aci-triple" in _value(out, "EXISTS")
    assert "auth is not enabled" in _value(out, "NOKEYS")

    # a second process: the service outlives the first and is found by name; update() starts the new code
    (ws / "score_two.py").write_text(SCORE_TWO)
    out = control(ws, SETUP + """\
service = Webservice(ws, 'aci-triple')
print("FOUND", json.dumps([type(service).__name__, service.state, [s.name for s in Webservice.list(ws)],
                           [s.name for s in Webservice.list(ws, compute_type='AKS')]]))
service.update(models=[Model(ws, 'triple'), Model(ws, 'double')],
               inference_config=InferenceConfig(entry_script='score_two.py'))
print("UPDATED", json.dumps(service.run(json.dumps({'data': [5]}))))
service.delete()
try:
    Webservice(ws, 'aci-triple')
except WebserviceException as exc:
    print("GONE", json.dumps(str(exc)))
""")
    assert _value(out, "FOUND") == ["AciWebservice", "Healthy", ["aci-triple"], []]
    updated = _value(out, "UPDATED")
    assert updated["answers"] == {"triple": 15, "double": 10}
    root = updated["model_dir"]  # several models: $AZUREML_MODEL_DIR/<name>/<version>/<file>
    assert updated["paths"] == {"triple": os.path.join(root, "triple", "1", "model.pkl"),
                                "double": os.path.join(root, "double", "1", "model.pkl")}
    assert _value(out, "GONE") == "WebserviceNotFound: Webservice with name aci-triple not found in provided workspace"
    assert _refused(port), "the service's port still answers after delete()"


def test_keys_a_raw_request_without_one_and_a_killed_server(ws, home):
    out = control(ws, SETUP + """\
model = Model.register(ws, model_path="triple/model.pkl", model_name="triple")
config = AksWebservice.deploy_configuration(num_replicas=2, cpu_cores=1, autoscale_enabled=False)
service = Model.deploy(ws, 'aks-triple', [model], InferenceConfig(entry_script='score.py'), config)
service.wait_for_deployment()
primary, secondary = service.get_keys()
print("KEYS", json.dumps([primary, secondary, service.auth_enabled, service.scoring_uri]))
print("RUN", json.dumps(service.run({'data': [2]})))
service.regen_key('Primary')
print("NEW", json.dumps(service.get_keys()))
""")
    old, secondary, auth, uri = _value(out, "KEYS")
    assert auth is True and old and secondary and old != secondary
    assert _value(out, "RUN")["answer"] == [6]
    new, kept = _value(out, "NEW")
    assert kept == secondary and new != old
    port = _port(uri)
    assert _post(port, {}) == 401
    assert _post(port, {"Authorization": f"Bearer {old}"}) == 401
    assert _post(port, {"Authorization": f"Bearer {new}"}) == 200
    assert _post(port, {"Authorization": f"Bearer {secondary}"}) == 200
    record = json.loads((home / "endpoints" / "aks-triple" / "deployments" / "default" / "deployment.json").read_text())
    assert record["instance_count"] == 2
    os.killpg(record["pid"], signal.SIGKILL)
    until(lambda: not pid_alive(record["pid"]), 10, "the server to die")
    out = control(ws, SETUP + """\
service = Webservice(ws, 'aks-triple')
print("STATE", json.dumps([service.state, service.error]))
try:
    service.wait_for_deployment()
except WebserviceException as exc:
    print("WAIT", json.dumps(str(exc)))
""")
    state, why = _value(out, "STATE")
    assert state == "Unhealthy" and "not running" in why
    assert "current service state: Unhealthy" in _value(out, "WAIT")


def test_a_failing_init_is_one_line_and_leaves_nothing_listening(ws, home):
    port = free_port()
    (ws / "broken.py").write_text("def init():\n    raise ValueError('weights file is corrupt')\n"
                                  "def run(input_data):\n    return input_data\n")
    out = control(ws, SETUP + f"""\
model = Model.register(ws, model_path="triple/model.pkl", model_name="triple")
service = Model.deploy(ws, 'local-broken', [model], InferenceConfig(entry_script='broken.py'),
                       LocalWebservice.deploy_configuration(port={port}))
print("STATE", json.dumps([service.state, service.port]))
try:
    service.wait_for_deployment(show_output=True)
except WebserviceException as exc:
    print("WAIT", json.dumps(str(exc)))
print("LOGS", json.dumps("weights file is corrupt" in service.get_logs()))
service.delete()
for bad in ("Bad_Name", "ab"):
    try:
        Model.deploy(ws, bad, [model], InferenceConfig(entry_script='broken.py'))
    except WebserviceException as exc:
        print("NAME", json.dumps(str(exc)))
try:
    Model.deploy(ws, 'no-script', [model], InferenceConfig(entry_script='missing.py'))
except WebserviceException as exc:
    print("MISSING", json.dumps(str(exc)))
print("LEFT", json.dumps([s.name for s in Webservice.list(ws)]))
""")
    assert _value(out, "STATE") == ["Failed", port]
    wait = _value(out, "WAIT")
    assert "\n" not in wait and "current service state: Failed" in wait and "ValueError: weights file is corrupt" in wait
    assert "Traceback" not in out.stdout + out.stderr
    assert _refused(port)
    assert _value(out, "LOGS") is True
    assert all("provided service name is invalid" in line for line in _lines(out, "NAME"))
    assert len(_lines(out, "NAME")) == 2
    missing = _value(out, "MISSING")
    assert "\n" not in missing and "missing.py does not exist" in missing
    assert _value(out, "LEFT") == []
