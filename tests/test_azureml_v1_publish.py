"""v1: published pipelines, pipeline endpoints and drafts, as Azure's notebooks use them
(MachineLearningNotebooks, how-to-use-azureml/machine-learning-pipelines/intro-to-pipelines/
aml-pipelines-publish-and-run-using-rest-endpoint.ipynb, aml-pipelines-setup-versioned-pipeline-endpoints.ipynb,
aml-pipelines-how-to-use-pipeline-drafts.ipynb): a pipeline published under a name is submitted again with
new parameter values, from another script, by an endpoint's version and by a POST to its endpoint URL while
`mltrain ui --pipelines-only` runs. Real processes: `python control.py`, the REST server, the step runs."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support import free_port
from test_azureml_v1 import control, make_workspace

TRAIN = """\
import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--output_train")
a = p.parse_args()
os.makedirs(a.output_train, exist_ok=True)
open(os.path.join(a.output_train, "data.txt"), "w").write("trained-v1")
print("TRAIN wrote trained-v1")
"""

COMPARE = """\
import argparse, os
p = argparse.ArgumentParser()
p.add_argument("--compare_data1")
p.add_argument("--output_compare")
p.add_argument("--pipeline_param", type=int)
a = p.parse_args()
text = open(os.path.join(a.compare_data1, "data.txt")).read()
os.makedirs(a.output_compare, exist_ok=True)
open(os.path.join(a.output_compare, "result.txt"), "w").write(f"{text} x{a.pipeline_param}")
print("COMPARE", text, a.pipeline_param)
"""

#: The REST notebook's pipeline: a train step, and a compare step reading its output with a parameter.
BUILD = """\
from azureml.core import Workspace, Experiment
from azureml.data import OutputFileDatasetConfig
from azureml.core.compute import AmlCompute
from azureml.pipeline.core import Pipeline, PublishedPipeline, PipelineRun
from azureml.pipeline.steps import PythonScriptStep
from azureml.pipeline.core.graph import PipelineParameter

ws = Workspace.from_config()
aml_compute = AmlCompute(ws, "cpu-cluster")

def build(default):
    processed_data1 = OutputFileDatasetConfig(name="processed_data1")
    trainStep = PythonScriptStep(script_name="train.py", arguments=["--output_train", processed_data1],
                                 compute_target=aml_compute, source_directory="publish_run_train")
    pipeline_param = PipelineParameter(name="pipeline_arg", default_value=default)
    processed_data3 = OutputFileDatasetConfig(name="processed_data3")
    compareStep = PythonScriptStep(
        script_name="compare.py",
        arguments=["--compare_data1", processed_data1.as_input(), "--output_compare", processed_data3,
                   "--pipeline_param", pipeline_param],
        compute_target=aml_compute, source_directory="publish_run_compare")
    return Pipeline(workspace=ws, steps=[compareStep])

def done(tag, run):
    run.wait_for_completion(show_output=False)
    print(tag, run.id, run.get_status(), flush=True)
"""


def result(home: Path, run_id: str) -> str:
    """What the pipeline run's compare step wrote."""
    return (home / "runs" / f"{run_id}.compare_py" / "outputs" / "processed_data3" / "result.txt").read_text()


def runs_of(out: str, tag: str) -> list:
    return [line.split()[1] for line in out.splitlines() if line.startswith(tag + " ") and "Completed" in line]


def line_of(out: str, tag: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(tag + " "))


@pytest.fixture
def ws(project, home) -> Path:
    ws = make_workspace(project)
    for folder, name, text in (("publish_run_train", "train.py", TRAIN), ("publish_run_compare", "compare.py", COMPARE)):
        (ws / folder).mkdir()
        (ws / folder / name).write_text(text)
    (ws / ".mltrain" / "compute").mkdir(parents=True, exist_ok=True)
    (ws / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    return ws


def publish(ws: Path) -> str:
    out = control(ws, BUILD + """
published_pipeline1 = build(10).publish(name="My_New_Pipeline", description="My Published Pipeline Description",
                                        continue_on_step_failure=True)
print("PUBLISHED", published_pipeline1.id, published_pipeline1.status, published_pipeline1.name)
""")
    published = line_of(out.stdout, "PUBLISHED").split()
    assert published[2:] == ["Active", "My_New_Pipeline"]
    # Azure snapshots the source folders at publish: a script edited afterwards changes no published pipeline
    train = ws / "publish_run_train" / "train.py"
    train.write_text(train.read_text().replace("trained-v1", "trained-v2"))
    return published[1]


def test_a_published_pipeline_runs_again_from_another_script_with_new_parameter_values(ws, home):
    pid = publish(ws)
    out = control(ws, BUILD + f"""
published = PublishedPipeline.get(ws, "{pid}")
done("RUN", published.submit(ws, "Pipeline_experiment_sample"))
done("RUN", Experiment(ws, "Pipeline_experiment_sample").submit(published, pipeline_parameters={{"pipeline_arg": 45}}))
try:
    published.submit(ws, "Pipeline_experiment_sample", pipeline_parameters={{"nope": 1}})
except Exception as exc:
    print("UNKNOWN", type(exc).__name__, exc)
print("LISTED", [p.id for p in PublishedPipeline.list(ws)] == ["{pid}"])
published.disable()
print("ACTIVE", len(PublishedPipeline.list(ws)), len(PublishedPipeline.list(ws, active_only=False)))
try:
    PublishedPipeline.get(ws, "{pid}").submit(ws, "Pipeline_experiment_sample")
except Exception as exc:
    print("DISABLED", exc)
published.enable()
try:
    print(published.endpoint)
except Exception as exc:
    print("NOSERVER", exc)
""")
    first, second = runs_of(out.stdout, "RUN")
    assert result(home, first) == "trained-v1 x10"  # the snapshot, not the edited script
    assert result(home, second) == "trained-v1 x45"
    assert line_of(out.stdout, "UNKNOWN") == ("UNKNOWN UserErrorException pipeline_parameters: 'nope' is not a "
                                              "PipelineParameter of this pipeline (parameters: pipeline_arg)")
    assert "LISTED True" in out.stdout and "ACTIVE 0 1" in out.stdout
    assert line_of(out.stdout, "DISABLED").endswith("is Disabled: enable() it before submitting it")
    assert "start `mltrain ui` (or `mltrain ui --pipelines-only`)" in line_of(out.stdout, "NOSERVER")
    record = json.loads((home / "v1_published" / "pipelines" / pid / "published.json").read_text())
    assert record["status"] == "Active" and record["parameters"] == {"pipeline_arg": "10"}



def test_a_post_to_the_endpoint_starts_the_published_pipeline_and_answers_its_run_id(ws, home):
    pid = publish(ws)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mltrain", "ui", "--pipelines-only", "--pipelines-port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                              env=dict(os.environ))
    try:
        assert f"http://127.0.0.1:{port}" in server.stdout.readline()
        out = control(ws, BUILD + f"""
import requests
from azureml.core.authentication import InteractiveLoginAuthentication
from azureml.pipeline.core import PipelineEndpoint

aad_token = InteractiveLoginAuthentication().get_authentication_header()
published_pipeline = PublishedPipeline.get(ws, "{pid}")
rest_endpoint1 = published_pipeline.endpoint
print("URL", rest_endpoint1)
response = requests.post(rest_endpoint1, headers=aad_token,
                         json={{"ExperimentName": "My_Pipeline1", "RunSource": "SDK",
                                "ParameterAssignments": {{"pipeline_arg": 7}}}})
response.raise_for_status()
run_id = response.json().get('Id')
done("RUN", PipelineRun(ws.experiments["My_Pipeline1"], run_id))
bad = requests.post(rest_endpoint1, headers=aad_token,
                    json={{"ExperimentName": "My_Pipeline1", "ParameterAssignments": {{"nope": 1}}}})
print("BAD", bad.status_code, bad.json()["error"]["message"])

pipeline_endpoint = PipelineEndpoint.publish(workspace=ws, name="PipelineEndpointTest",
                                             pipeline=published_pipeline, description="Test description Notebook")
rest_endpoint_id = pipeline_endpoint.endpoint
rest_endpoint_name = rest_endpoint_id.split("Id", 1)[0] + "Name?name=" + pipeline_endpoint.name
response = requests.post(rest_endpoint_name + "&pipelineVersion=0", headers=aad_token,
                         json={{"ExperimentName": "default_pipeline", "ParameterAssignments": {{"pipeline_arg": 8}}}})
response.raise_for_status()
done("RUN", PipelineRun(ws.experiments["default_pipeline"], response.json()["Id"]))
response = requests.post(rest_endpoint_id + "/0", headers=aad_token, json={{"ExperimentName": "default_pipeline"}})
done("RUN", PipelineRun(ws.experiments["default_pipeline"], response.json()["Id"]))
""")
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)
    assert line_of(out.stdout, "URL") == f"URL http://127.0.0.1:{port}/pipelines/v1.0/PipelineRuns/PipelineSubmit/{pid}"
    by_post, by_name, by_id = runs_of(out.stdout, "RUN")
    assert result(home, by_post) == "trained-v1 x7"
    assert result(home, by_name) == "trained-v1 x8" and result(home, by_id) == "trained-v1 x10"
    assert line_of(out.stdout, "BAD") == ("BAD 400 pipeline_parameters: 'nope' is not a PipelineParameter of this "
                                          "pipeline (parameters: pipeline_arg)")
    assert server.returncode == 0 and not (home / "pipelines_rest.json").exists()


def test_endpoint_versions_drafts_and_publishing_from_a_run(ws, home):
    out = control(ws, BUILD + """
from azureml.pipeline.core import PipelineEndpoint, PipelineDraft

pipeline1 = build(10)
pipeline_run1 = Experiment(ws, 'Pipeline_experiment_sample').submit(pipeline1)
published_pipeline2 = pipeline_run1.publish_pipeline(name="My_New_Pipeline2", description="from a run",
                                                     version="0.1", continue_on_step_failure=True)
print("FROMRUN", published_pipeline2.name, published_pipeline2.version)
done("RUN", pipeline_run1)

pipeline_endpoint = PipelineEndpoint.publish(workspace=ws, name="PipelineEndpointTest", pipeline=pipeline1,
                                             description="Test description Notebook")
other = build(99).publish(name="Other")
pipeline_endpoint_by_name = PipelineEndpoint.get(workspace=ws, name="PipelineEndpointTest")
pipeline_endpoint_by_name.add(other)
print("VERSIONS", [(ve.version, ve.pipeline.id == other.id) for ve in pipeline_endpoint_by_name.list_versions()],
      pipeline_endpoint_by_name.get_default_version())
pipeline_endpoint_by_name.set_default_version("1")
done("RUN", pipeline_endpoint_by_name.submit("NewName"))
done("RUN", pipeline_endpoint_by_name.submit("NewName", pipeline_version="0", pipeline_parameters={"pipeline_arg": 3}))
pipeline_endpoint_by_name.set_name(name="NewName")
endpoint = PipelineEndpoint.get(workspace=ws, id=PipelineEndpoint.get(workspace=ws, name="NewName").id)
done("RUN", Experiment(ws, name="submit_endpoint_sample").submit(endpoint, tags={'endpoint_tag': "1"},
                                                                 pipeline_version="0"))
try:
    PipelineEndpoint.publish(workspace=ws, name="NewName", pipeline=other, description="again")
except Exception as exc:
    print("TWICE", exc)
endpoint.disable()
print("ENDPOINTS", len(PipelineEndpoint.list(ws)), len(PipelineEndpoint.list(ws, active_only=False)))

pipeline_draft = PipelineDraft.create(ws, name="TestPipelineDraft", description="draft description",
                                      experiment_name="pipeline_draft_sample", pipeline=pipeline1,
                                      continue_on_step_failure=True, tags={'dev': 'true'},
                                      properties={'train': 'value'})
print("DRAFTS", [d.name for d in PipelineDraft.list(ws, tags={'dev': 'true'})], PipelineDraft.list(ws, tags={'dev': 'no'}))
pipeline_draft = PipelineDraft.get(ws, id=pipeline_draft.id)
pipeline_draft.update(name="UpdatedPipelineDraft", description="has updated train step", pipeline=build(5))
done("RUN", pipeline_draft.submit_run())
published_pipeline = pipeline_draft.publish()
print("DRAFTPUB", published_pipeline.name, PipelineDraft.get(ws, pipeline_draft.id).last_submitted_pipeline_run_id)
copy = pipeline_draft.clone()
pipeline_draft.delete()
print("LEFT", [d.id for d in PipelineDraft.list(ws)] == [copy.id])
""")
    runs = runs_of(out.stdout, "RUN")
    assert [result(home, r) for r in runs] == ["trained-v1 x10", "trained-v1 x99", "trained-v1 x3", "trained-v1 x10",
                                              "trained-v1 x5"]
    assert "FROMRUN My_New_Pipeline2 0.1" in out.stdout
    assert "VERSIONS [('0', False), ('1', True)] 0" in out.stdout
    assert line_of(out.stdout, "TWICE") == ("TWICE PipelineEndpoint 'NewName' already exists: PipelineEndpoint.get("
                                            "workspace, name='NewName').add_default(pipeline) adds a version")
    assert "ENDPOINTS 0 1" in out.stdout
    assert "DRAFTS ['TestPipelineDraft'] []" in out.stdout
    assert line_of(out.stdout, "DRAFTPUB") == f"DRAFTPUB UpdatedPipelineDraft {runs[-1]}"
    assert "LEFT True" in out.stdout


def test_schedules_stay_refused_in_one_line(ws, home):
    out = control(ws, """
for what in ("from azureml.pipeline.core import Schedule",
             "from azureml.pipeline.core.schedule import ScheduleRecurrence, Schedule"):
    try:
        exec(what)
    except Exception as exc:
        print("REFUSED", type(exc).__name__, exc)
""")
    refused = [line for line in out.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 2 and all("schedule a published pipeline with cron" in line for line in refused)
    assert "azureml.pipeline.core.schedule.ScheduleRecurrence is not available" in refused[1]
