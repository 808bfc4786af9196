"""v1: datasets behind PipelineParameters, in the shapes of Azure's showcasing-dataset notebook
(MachineLearningNotebooks, how-to-use-azureml/machine-learning-pipelines/intro-to-pipelines/
aml-pipelines-showcasing-dataset-and-pipelineparameter.ipynb): a FileDataset mounted and a TabularDataset
consumed directly through DatasetConsumptionConfig, read in the step with Run.get_context().input_datasets;
other datasets chosen at submit time rerun the step, the same ones reuse it, and a changed definition of the
same file (no header) reruns it; a submitted dataset gets an id Dataset.get_by_id finds. Bad input is one line. Real processes: `python control.py`, the steps' runs."""
from __future__ import annotations

from pathlib import Path

from support import free_port
from test_azureml_v1 import control, make_workspace

TRAIN = """\
from azureml.core import Run

input_file_ds_path = Run.get_context().input_datasets['file_dataset']
with open(input_file_ds_path, 'r') as f:
    content = f.read()
    print("FILE", content.splitlines()[0])

input_tabular_ds = Run.get_context().input_datasets['tabular_dataset']
tabular_df = input_tabular_ds.to_pandas_dataframe()
print("TABLE", type(input_tabular_ds).__name__, tabular_df.shape, list(tabular_df.columns)[:2])
"""

PIPELINE = """\
from azureml.core import Workspace, Experiment, Dataset
from azureml.core.compute import ComputeTarget
from azureml.data.dataset_consumption_config import DatasetConsumptionConfig
from azureml.pipeline.core import PipelineParameter
from azureml.pipeline.core import Pipeline
from azureml.pipeline.steps import PythonScriptStep

ws = Workspace.from_config()
experiment = Experiment(ws, 'showcasing-dataset')
compute_target = ComputeTarget(workspace=ws, name="cpu-cluster")

file_dataset = Dataset.File.from_files('https://example.org/demo/Titanic.csv')
file_pipeline_param = PipelineParameter(name="file_ds_param", default_value=file_dataset)
file_ds_consumption = DatasetConsumptionConfig("file_dataset", file_pipeline_param).as_mount()

tabular_dataset = Dataset.Tabular.from_delimited_files('https://example.org/demo/Titanic.csv')
tabular_pipeline_param = PipelineParameter(name="tabular_ds_param", default_value=tabular_dataset)
tabular_ds_consumption = DatasetConsumptionConfig("tabular_dataset", tabular_pipeline_param)

train_step = PythonScriptStep(
    name="train_step",
    script_name="train_with_dataset.py",
    arguments=["--param1", file_ds_consumption, "--param2", tabular_ds_consumption],
    inputs=[file_ds_consumption, tabular_ds_consumption],
    compute_target=compute_target,
    source_directory='.')
pipeline = Pipeline(workspace=ws, steps=[train_step])

def submit(label, **parameters):
    run = experiment.submit(pipeline, pipeline_parameters=parameters) if parameters else experiment.submit(pipeline)
    run.wait_for_completion()
    step = run.find_step_run('train_step')[0]
    print(label, run.get_status(), "reused" if step.reused else "ran", flush=True)

iris_file_ds = Dataset.File.from_files('https://example.org/demo/iris.csv')
iris_tabular_ds = Dataset.Tabular.from_delimited_files('https://example.org/demo/iris.csv')
submit("DEFAULT")
submit("IRIS", file_ds_param=iris_file_ds, tabular_ds_param=iris_tabular_ds)
submit("IRIS_AGAIN", file_ds_param=iris_file_ds, tabular_ds_param=iris_tabular_ds)
no_header = Dataset.Tabular.from_delimited_files('https://example.org/demo/iris.csv', header=False)
submit("NO_HEADER", file_ds_param=iris_file_ds, tabular_ds_param=no_header)
# a dataset a submit consumed was saved, as Azure saves it: its id finds it again
print("BY_ID", Dataset.get_by_id(ws, id=iris_tabular_ds.id).to_pandas_dataframe().shape, iris_file_ds.id is not None)
"""

TITANIC = "PassengerId,Survived,Pclass\n1,0,3\n2,1,1\n3,1,3\n"
IRIS = "sepal_length,sepal_width,species\n5.1,3.5,setosa\n4.9,3.0,setosa\n"


def _workspace(project: Path) -> Path:
    ws = make_workspace(project)
    (ws / "train_with_dataset.py").write_text(TRAIN)
    (ws / ".mltrain" / "compute").mkdir(parents=True, exist_ok=True)
    (ws / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    (ws / ".mltrain" / "datastores.yaml").write_text("https://example.org/demo/: data\n")
    (ws / "data").mkdir()
    (ws / "data" / "Titanic.csv").write_text(TITANIC)
    (ws / "data" / "iris.csv").write_text(IRIS)
    return ws


def _logs(home: Path) -> str:
    return "".join(p.read_text() for p in sorted(Path(home, "runs").rglob("rank_0.log")))


def test_dataset_parameters_are_the_steps_input_datasets_and_key_its_reuse(project, home):
    ws = _workspace(project)
    out = control(ws, PIPELINE, timeout=400)
    assert "DEFAULT Completed ran" in out.stdout, out.stdout[-2000:]
    # other datasets chosen at submit time: the step runs on them; the same ones again: reused
    assert "IRIS Completed ran" in out.stdout and "IRIS_AGAIN Completed reused" in out.stdout, out.stdout[-2000:]
    # the same file read another way (no header row) is another definition: the step runs again
    assert "NO_HEADER Completed ran" in out.stdout, out.stdout[-2000:]
    assert "BY_ID (2, 3) True" in out.stdout
    logs = _logs(home)
    assert "FILE PassengerId,Survived,Pclass" in logs and "FILE sepal_length,sepal_width,species" in logs
    assert "TABLE TabularDataset (3, 3) ['PassengerId', 'Survived']" in logs
    assert "TABLE TabularDataset (2, 3) ['sepal_length', 'sepal_width']" in logs
    assert "TABLE TabularDataset (3, 3) [0, 1]" in logs  # header=False: the header line is a row


BAD_VALUE = PIPELINE.split("def submit")[0] + """\
try:
    experiment.submit(pipeline, pipeline_parameters={'tabular_ds_param': 'iris.csv'})
except Exception as exc:
    print("REFUSED", type(exc).__name__, str(exc))
"""

UNKNOWN_NAME = """\
from azureml.core import Workspace, Experiment, Dataset
from azureml.pipeline.core import Pipeline
from azureml.pipeline.steps import PythonScriptStep

ws = Workspace.from_config()
iris = Dataset.Tabular.from_delimited_files('data/iris.csv')
step = PythonScriptStep(name="reader", script_name="read_unknown.py", inputs=[iris.as_named_input('iris')],
                        compute_target='cpu-cluster', source_directory='.')
run = Experiment(ws, 'unknown-name').submit(Pipeline(workspace=ws, steps=[step]))
print("STATUS", run.wait_for_completion(raise_on_error=False))
"""


def test_a_dataset_parameter_given_a_non_dataset_is_one_line(project, home):
    ws = _workspace(project)
    out = control(ws, BAD_VALUE)
    assert ("REFUSED UserErrorException pipeline_parameters['tabular_ds_param'] must be a TabularDataset (as its "
            "default is), not str 'iris.csv'") in out.stdout, out.stdout[-2000:]
    assert not Path(home, "runs").exists() or not list(Path(home, "runs").glob("*train_step*"))


def test_an_unknown_input_datasets_name_in_the_step_is_one_line(project, home):
    ws = _workspace(project)
    (ws / "read_unknown.py").write_text("from azureml.core import Run\n"
                                        "Run.get_context().input_datasets['tabular_dataset']\n")
    out = control(ws, UNKNOWN_NAME)
    assert "STATUS Failed" in out.stdout, out.stdout[-2000:]
    last = _logs(home).strip().splitlines()[-1]
    assert last == ("azureml.core.dataset.UnknownInputDataset: Run.input_datasets has no 'tabular_dataset': this "
                    "step's datasets are 'iris' (the names given to DatasetConsumptionConfig(name, ...) or "
                    "as_named_input(name))"), last


REST = PIPELINE.split("def submit")[0] + """\
import requests
from azureml.pipeline.core import PipelineRun
iris_file_ds = Dataset.File.from_files('https://example.org/demo/iris.csv')
iris_tabular_ds = Dataset.Tabular.from_delimited_files('https://example.org/demo/iris.csv')
first = experiment.submit(pipeline, pipeline_parameters={'file_ds_param': iris_file_ds,
                                                         'tabular_ds_param': iris_tabular_ds})
first.wait_for_completion()  # the datasets a submit consumed are saved: they have ids
published_pipeline = pipeline.publish(name="Dataset_Pipeline", description="datasets as parameters")
response = requests.post(published_pipeline.endpoint, headers={"Authorization": "Bearer x"},
                         json={"ExperimentName": "MyRestPipeline", "RunSource": "SDK",
                               "DataSetDefinitionValueAssignments": {
                                   "file_ds_param": {"SavedDataSetReference": {"Id": iris_file_ds.id}},
                                   "tabular_ds_param": {"SavedDataSetReference": {"Id": iris_tabular_ds.id}}}})
response.raise_for_status()
run = PipelineRun(ws.experiments["MyRestPipeline"], response.json()["Id"])
run.wait_for_completion()
step = run.find_step_run('train_step')[0]
print("REST", run.get_status(), step.reused, open(step._dir / "logs" / "rank_0.log").read().replace(chr(10), " | "))
"""


def test_a_rest_call_chooses_saved_datasets_by_id_as_azures_notebook_posts_them(project, home):
    import os
    import signal
    import subprocess
    import sys

    ws = _workspace(project)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mltrain", "ui", "--pipelines-only", "--pipelines-port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                              env=dict(os.environ))
    try:
        assert f"http://127.0.0.1:{port}" in server.stdout.readline()
        out = control(ws, REST, timeout=400)
    finally:
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=30)
    line = next(x for x in out.stdout.splitlines() if x.startswith("REST "))
    # the published pipeline ran on the iris datasets the call named (its defaults are titanic's)
    assert line.startswith("REST Completed "), line
    assert "FILE sepal_length,sepal_width,species" in line and "TABLE TabularDataset (2, 3)" in line, line
