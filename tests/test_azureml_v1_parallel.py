"""v1's ParallelRunStep (issue 52), written as Azure's tabular-dataset-inference-iris and
file-dataset-image-inference notebooks write it: a Dataset.Tabular from the default datastore, a
ParallelRunConfig with node_count 2, the step's PipelineData output, the entry script's EntryScript logger, the
rows read back from append_row_file_name in the step's output."""
from __future__ import annotations

import json

from test_azureml_v1 import control, make_workspace

SCORE = """\
import argparse
from azureml_user.parallel_run import EntryScript


def init():
    global factor
    EntryScript().logger.info("init() is called.")
    parser = argparse.ArgumentParser(description="Iris model serving")
    parser.add_argument('--factor', dest="factor", type=int, required=True)
    args, unknown_args = parser.parse_known_args()
    factor = args.factor


def run(input_data):
    EntryScript().logger.info("run() is called with: {} rows.".format(len(input_data)))
    result = input_data.drop(input_data.columns[2:], axis=1)
    result['variety'] = input_data['a'] * factor
    return result
"""

NOTEBOOK = """\
import os, tempfile
import pandas as pd
from azureml.core import Workspace, Experiment, Environment
from azureml.core.compute import ComputeTarget
from azureml.core.dataset import Dataset
from azureml.pipeline.core import Pipeline, PipelineData
from azureml.pipeline.steps import ParallelRunStep, ParallelRunConfig

ws = Workspace.from_config()
compute_target = ComputeTarget(workspace=ws, name="cpu-cluster")
datastore = ws.get_default_datastore()
datastore.upload(src_dir="iris", target_path="iris", overwrite=True)
input_iris_ds = Dataset.Tabular.from_delimited_files(path=datastore.path('iris/'), validate=False)
print("ROWS", len(input_iris_ds.to_pandas_dataframe()))
named_iris_ds = input_iris_ds.as_named_input('iris_data')
output_folder = PipelineData(name='inferences', datastore=datastore)
parallel_run_config = ParallelRunConfig(
    source_directory="Code", entry_script="iris_score.py", mini_batch_size='1KB', error_threshold=5,
    output_action='append_row', append_row_file_name="iris_outputs.txt",
    environment=Environment(name="predict_environment"), compute_target=compute_target, node_count=2,
    run_invocation_timeout=600)
distributed_csv_iris_step = ParallelRunStep(
    name='example-iris', inputs=[named_iris_ds], output=output_folder, parallel_run_config=parallel_run_config,
    arguments=['--factor', 10], allow_reuse=False)
pipeline = Pipeline(workspace=ws, steps=[distributed_csv_iris_step])
pipeline_run = Experiment(ws, 'iris-prs').submit(pipeline)
pipeline_run.wait_for_completion(show_output=False)
print("STATUS", pipeline_run.get_status())
prediction_run = pipeline_run.find_step_run(distributed_csv_iris_step.name)[0]
prediction_output = prediction_run.get_output_data(output_folder.name)
target_dir = tempfile.mkdtemp()
prediction_output.download(local_path=target_dir)
result_file = os.path.join(target_dir, prediction_output.path_on_datastore, parallel_run_config.append_row_file_name)
df = pd.read_csv(result_file, delimiter=" ", header=None)
df.columns = ["a", "b", "variety"]
print("Prediction has ", df.shape[0], " rows")
print("SUM", int(df["variety"].sum()), "FIRST", list(df.iloc[0]))
"""


def test_parallel_run_step_scores_a_tabular_dataset_as_the_iris_notebook_does(project, home):
    ws = make_workspace(project)
    (ws / "iris").mkdir()
    (ws / "iris" / "iris.csv").write_text("a,b,c\n" + "".join(f"{i},{i + 1},x\n" for i in range(300)))
    (ws / "Code").mkdir()
    (ws / "Code" / "iris_score.py").write_text(SCORE)
    (ws / ".mltrain" / "compute").mkdir(parents=True, exist_ok=True)
    (ws / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    out = control(ws, NOTEBOOK)
    assert "ROWS 300" in out.stdout and "STATUS Completed" in out.stdout, out.stdout + out.stderr
    assert "Prediction has  300  rows" in out.stdout
    assert f"SUM {sum(range(300)) * 10} FIRST [0, 1, 0]" in out.stdout
    step = next(p for p in (home / "runs").iterdir() if p.name.endswith(".example-iris"))
    logs = "".join(p.read_text() for p in (step / "logs" / "user" / "stderr").rglob("*.txt"))
    assert "init() is called." in logs and "run() is called with:" in logs
    assert len(json.loads((step / "run.json").read_text())["ranks"]) == 2  # node_count=2: an agent on each
