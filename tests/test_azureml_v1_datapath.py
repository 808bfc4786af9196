"""v1: a DataPath behind a PipelineParameter, bound with DataPathComputeBinding in a tuple, as Azure's
showcasing-datapath notebook (MachineLearningNotebooks, how-to-use-azureml/machine-learning-pipelines/
intro-to-pipelines/aml-pipelines-showcasing-datapath-and-pipelineparameter.ipynb) writes it: the tuple is a
step input and an argument; the pipeline runs with the default DataPath and again with another one chosen
at submit time. Real processes: `python control.py`, the pipeline's step runs."""
from __future__ import annotations

from pathlib import Path

from test_azureml_v1 import control, make_workspace

TRAIN = """\
import argparse, os
parser = argparse.ArgumentParser("train")
parser.add_argument("--arg1", type=str)
parser.add_argument("--arg2", type=str)
args = parser.parse_args()
print("Sample string argument  : %s" % args.arg1)
print("Sample datapath argument: %s" % args.arg2)
print("FILES", sorted(os.listdir(args.arg2)))
"""

CONTROL = """\
from azureml.core import Workspace, Experiment
from azureml.core.compute import ComputeTarget
from azureml.data.datapath import DataPath, DataPathComputeBinding
from azureml.pipeline.core import PipelineParameter
from azureml.pipeline.core import Pipeline
from azureml.pipeline.steps import PythonScriptStep

ws = Workspace.from_config()
experiment = Experiment(ws, 'showcasing-datapath')
compute_target = ComputeTarget(workspace=ws, name="cpu-cluster")
def_blob_store = ws.get_default_datastore()
print("Default datastore's name: {}".format(def_blob_store.name))
for folder in ("sample_datapath1", "sample_datapath2"):
    def_blob_store.upload_files(["data/" + folder + ".txt"], relative_root="data", target_path=folder,
                                show_progress=False)

data_path = DataPath(datastore=def_blob_store, path_on_datastore='sample_datapath1')
datapath1_pipeline_param = PipelineParameter(name="input_datapath", default_value=data_path)
datapath_input = (datapath1_pipeline_param, DataPathComputeBinding(mode='mount'))

string_pipeline_param = PipelineParameter(name="input_string", default_value='sample_string1')

train_step = PythonScriptStep(
    name='train_step',
    script_name="train_with_datapath.py",
    arguments=["--arg1", string_pipeline_param, "--arg2", datapath_input],
    inputs=[datapath_input],
    compute_target=compute_target,
    source_directory='.')

pipeline = Pipeline(workspace=ws, steps=[train_step])
pipeline_run = experiment.submit(pipeline)
pipeline_run.wait_for_completion()
print("FIRST", pipeline_run.get_status())
pipeline_run_with_params = experiment.submit(pipeline, \\
        pipeline_parameters={'input_datapath': DataPath(datastore=def_blob_store, path_on_datastore='sample_datapath2'),
                         'input_string': 'sample_string2'})
pipeline_run_with_params.wait_for_completion()
print("SECOND", pipeline_run_with_params.get_status())
"""


def test_datapath_parameter_bound_in_a_tuple_is_a_step_input(project, home):
    ws = make_workspace(project)
    (ws / "train_with_datapath.py").write_text(TRAIN)
    (ws / ".mltrain" / "compute").mkdir(parents=True)
    (ws / ".mltrain" / "compute" / "cpu-cluster.yaml").write_text("defaults: [local_schema, _self_]\n")
    (ws / "data").mkdir()
    for name in ("sample_datapath1", "sample_datapath2"):
        (ws / "data" / f"{name}.txt").write_text(name + "\n")
    out = control(ws, CONTROL)
    assert "Default datastore's name: workspaceblobstore" in out.stdout
    assert "FIRST Completed" in out.stdout and "SECOND Completed" in out.stdout, out.stdout[-2000:]
    logs = "".join(p.read_text() for p in Path(home, "runs").rglob("*.log"))
    assert "Sample string argument  : sample_string1" in logs and "Sample string argument  : sample_string2" in logs
    assert "FILES ['sample_datapath1.txt']" in logs and "FILES ['sample_datapath2.txt']" in logs
