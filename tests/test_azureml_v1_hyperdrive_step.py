"""A v1 HyperDriveStep (Azure's aml-pipelines-parameter-tuning-with-hyperdrive, in its own shapes): a sweep
as one step of a pipeline, reading an earlier step's data, its metrics and best model handed to a later
step and to the notebook (get_pipeline_output, HyperDriveStepRun), and reused when run again."""
from __future__ import annotations

import json

from test_azureml_v1 import control, make_workspace

PREP = """\
import argparse, os
p = argparse.ArgumentParser(); p.add_argument("--out"); a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
open(os.path.join(a.out, "factor.txt"), "w").write("10")
"""

TRAIN = """\
import argparse, os
from azureml.core.run import Run
p = argparse.ArgumentParser()
p.add_argument("--data"); p.add_argument("--learning_rate", type=float); p.add_argument("--epochs", type=int)
a = p.parse_args()
factor = float(open(os.path.join(a.data, "factor.txt")).read())
run = Run.get_context()
for epoch in range(a.epochs):
    run.log("accuracy", a.learning_rate * factor * (epoch + 1))
os.makedirs("outputs/model", exist_ok=True)
open("outputs/model/model.txt", "w").write(str(a.learning_rate))
"""

REGISTER = """\
import argparse, os
from shutil import copy2
from azureml.core import Model, Run
p = argparse.ArgumentParser(); p.add_argument("--saved-model", dest="saved_model"); a = p.parse_args()
os.makedirs("outputs", exist_ok=True)
open("outputs/seen.txt", "w").write(open(a.saved_model).read())
os.makedirs("./model/", exist_ok=True)
copy2(a.saved_model, "./model/")
ws = Run.get_context().experiment.workspace  # as Azure's register_model.py finds its workspace
Model.register(workspace=ws, model_name="hd-best", model_path="./model/")
"""

PIPELINE = """\
import json, os
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.pipeline.core import Pipeline, PipelineData, TrainingOutput
from azureml.pipeline.steps import HyperDriveStep, HyperDriveStepRun, PythonScriptStep
from azureml.train.hyperdrive import GridParameterSampling, HyperDriveConfig, PrimaryMetricGoal, choice

ws = Workspace.from_config()
datastore = ws.get_default_datastore()
prepped = PipelineData('prepped', datastore=datastore)
prep_step = PythonScriptStep(script_name='prep.py', name='prep', arguments=['--out', prepped], outputs=[prepped],
                             source_directory='.', compute_target='local')
env = Environment('local'); env.python.user_managed_dependencies = True
src = ScriptRunConfig(source_directory='.', script='train_hd.py', arguments=['--epochs', 3],
                      compute_target='local', environment=env)
hd_config = HyperDriveConfig(run_config=src,
                             hyperparameter_sampling=GridParameterSampling({'--learning_rate': choice(0.1, 0.3, 0.2)}),
                             primary_metric_name='accuracy', primary_metric_goal=PrimaryMetricGoal.MAXIMIZE,
                             max_total_runs=3, max_concurrent_runs=3)
metrics_data = PipelineData(name='metrics_data', datastore=datastore, pipeline_output_name='metrics_output',
                            training_output=TrainingOutput("Metrics"))
saved_model = PipelineData(name='saved_model', datastore=datastore, pipeline_output_name='model_output',
                           training_output=TrainingOutput("Model", model_file="outputs/model/model.txt"))
hd_step = HyperDriveStep(name='hd_step01', hyperdrive_config=hd_config,
                         estimator_entry_script_arguments=['--data', prepped], inputs=[prepped],
                         outputs=[metrics_data, saved_model])
register_step = PythonScriptStep(script_name='register.py', name='register_model_step01', inputs=[saved_model],
                                 arguments=['--saved-model', saved_model], source_directory='.',
                                 compute_target='local', allow_reuse=True)
register_step.run_after(hd_step)
pipeline = Pipeline(workspace=ws, steps=[hd_step, register_step])
for attempt in (1, 2):
    pipeline_run = Experiment(ws, 'Hyperdrive_sample').submit(pipeline)
    pipeline_run.wait_for_completion(show_output=False)
    print("STATUS", attempt, pipeline_run.get_status(),
          json.dumps({s.name: s.reused for s in pipeline_run.get_steps()}))

metrics_output = pipeline_run.get_pipeline_output('metrics_output')
num_file_downloaded = metrics_output.download('.', show_progress=True)
with open(metrics_output._path_on_datastore) as f:
    print("METRICS", num_file_downloaded, f.read().replace(chr(10), ''))
hd_step_run = HyperDriveStepRun(step_run=pipeline_run.find_step_run('hd_step01')[0])
best = hd_step_run.get_best_run_by_primary_metric()
print("BEST", best.id, json.dumps(hd_step_run.get_hyperparameters()[best.id]))
reg = pipeline_run.find_step_run('register_model_step01')[0]
reg.download_file('outputs/seen.txt', 'seen.txt')
print("SEEN", open('seen.txt').read())
from azureml.core import Model
print("MODEL", Model(ws, name='hd-best').version)
"""


def test_hyperdrive_step_sweeps_inside_a_pipeline_and_hands_on_its_metrics_and_best_model(project, home):
    ws = make_workspace(project)
    (ws / "prep.py").write_text(PREP)
    (ws / "train_hd.py").write_text(TRAIN)
    (ws / "register.py").write_text(REGISTER)
    out = control(ws, PIPELINE, timeout=400)
    lines = {line.split()[0] + (line.split()[1] if line.startswith("STATUS") else ""): line
             for line in out.stdout.splitlines() if line.split() and line.split()[0] in ("STATUS", "METRICS", "BEST",
                                                                                         "SEEN")}
    first = json.loads(lines["STATUS1"].split(maxsplit=3)[3])
    assert lines["STATUS1"].split()[2] == "Completed" and not any(first.values()), out.stdout
    # run again unchanged: the sweep is not run again, its outputs are the earlier run's
    again = json.loads(lines["STATUS2"].split(maxsplit=3)[3])
    assert lines["STATUS2"].split()[2] == "Completed" and all(again.values()), out.stdout
    # every trial's metrics, by run id: each read the prep step's factor (10) through its input
    metrics = json.loads(lines["METRICS"].split(maxsplit=2)[2])
    assert int(lines["METRICS"].split()[1]) == 1 and len(metrics) == 3
    finals = sorted(round(m["accuracy"][-1], 6) for m in metrics.values())
    assert finals == [3.0, 6.0, 9.0], metrics
    # the best trial (learning rate 0.3), named as the notebook named its hyperparameter
    best_id, best_params = lines["BEST"].split(maxsplit=2)[1:]
    assert best_id in metrics and json.loads(best_params) == {"--learning_rate": 0.3}
    # the later step read the best trial's model file, as a file
    assert lines["SEEN"] == "SEEN 0.3"
    # and registered it from inside its run, in the notebook's workspace (once: the second run reused the step)
    assert "MODEL 1" in out.stdout.splitlines()


def test_hyperdrive_step_refusals_are_one_line(project, home):
    ws = make_workspace(project)
    out = control(ws, """\
from azureml.core import ScriptRunConfig
from azureml.pipeline.core import PipelineData, TrainingOutput
from azureml.pipeline.steps import HyperDriveStep
from azureml.train.hyperdrive import GridParameterSampling, HyperDriveConfig, PrimaryMetricGoal, choice
from azureml.exceptions import UserErrorException

src = ScriptRunConfig(source_directory='.', script='pytorch_train.py', compute_target='local')
config = HyperDriveConfig(run_config=src, hyperparameter_sampling=GridParameterSampling({'--lr': choice(1, 2)}),
                          primary_metric_name='acc', primary_metric_goal=PrimaryMetricGoal.MAXIMIZE, max_total_runs=2)
out = PipelineData('out')
for call in (lambda: HyperDriveStep('hd', None),
             lambda: HyperDriveStep('hd', config, outputs=[PipelineData('x', training_output=TrainingOutput('Bogus'))]).output_kinds(),
             lambda: HyperDriveStep('hd', config, estimator_entry_script_arguments=['--out', out], outputs=[out])):
    try:
        call()
        print("ACCEPTED")
    except UserErrorException as exc:
        print("ONE", str(exc).count(chr(10)), exc)
""")
    lines = [line for line in out.stdout.splitlines() if line.startswith("ONE 0 ")]
    assert len(lines) == 3, out.stdout
    assert "hyperdrive_config must be a HyperDriveConfig, not NoneType" in lines[0]
    assert "TrainingOutput type 'Bogus'" in lines[1] and "(Metrics or Model)" in lines[1]
    assert "output 'out' cannot be a trial's argument" in lines[2]
