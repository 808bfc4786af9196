"""Azure ML SDK v1 control scripts run unmodified: the seeds' code blocks (001: ScriptRunConfig, curated and
conda environments, ComputeTarget's try/except, PyTorchConfiguration, MpiConfiguration with Horovod, register
and download; 002: the PyTorch estimator; 000: an MpiStep pipeline with reuse) and a HyperDrive notebook's
flow, each written here as the user's `control.py` beside a `config.json`, run as `python control.py` by
the environment's interpreter (no real azureml-core installed: mltrain's stand-ins answer). Real
processes throughout: the runs, mpirun, torch.distributed over gloo, Horovod, the model registry."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from horovod_support import require_horovod
from mpi_support import require_mpi
from support import run_mltrain

CONFIG = {"subscription_id": "00000000-0000-0000-0000-000000000000", "resource_group": "rg",
          "workspace_name": "birds"}

TRAIN = """\
import argparse, os
from azureml.core.run import Run

p = argparse.ArgumentParser()
p.add_argument("--num_epochs", type=int)
p.add_argument("--output_dir")
a = p.parse_args()
run = Run.get_context()
for epoch in range(a.num_epochs):
    run.log("loss", 1.0 / (epoch + 1))
run.log("best_val_acc", 0.75)
os.makedirs(a.output_dir, exist_ok=True)
with open(os.path.join(a.output_dir, "model.pt"), "wb") as f:
    f.write(b"weights of " + str(a.num_epochs).encode())
print("trained for", a.num_epochs, "epochs")
"""


@pytest.fixture
def ws(project, home) -> Path:
    """A workspace: config.json (as Azure's portal downloads it) and the user's training script."""
    return make_workspace(project)


def make_workspace(project: Path) -> Path:
    (project / "config.json").write_text(json.dumps(CONFIG))
    (project / "pytorch_train.py").write_text(TRAIN)
    return project


def control(ws: Path, body: str, timeout: float = 240, check: bool = True) -> subprocess.CompletedProcess:
    """`python control.py` in the workspace folder, as the user runs it."""
    (ws / "control.py").write_text(textwrap.dedent(body))
    proc = subprocess.run([sys.executable, "control.py"], cwd=ws, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ))
    if check:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def run_json(home: Path, run_id: str) -> dict:
    return json.loads((home / "runs" / run_id / "run.json").read_text())


SEED_001_SETUP = """\
import os
import shutil

from azureml.core.workspace import Workspace
from azureml.core import Experiment
from azureml.core import Environment

from azureml.core.compute import ComputeTarget, AmlCompute
from azureml.core.compute_target import ComputeTargetException

ws = Workspace.from_config()

project_folder = './pytorch-birds'
os.makedirs(project_folder, exist_ok=True)
shutil.copy('pytorch_train.py', project_folder)

cluster_name = "gpu-cluster"

try:
    compute_target = ComputeTarget(workspace=ws, name=cluster_name)
    print('Found existing compute target')
except ComputeTargetException:
    print('Creating a new compute target...')
    compute_config = AmlCompute.provisioning_configuration(vm_size='STANDARD_NC6',
                                                           max_nodes=4)

    compute_target = ComputeTarget.create(ws, cluster_name, compute_config)

    compute_target.wait_for_completion(show_output=True, min_node_count=None, timeout_in_minutes=20)
"""


def test_seed_001_single_node_run_registers_and_downloads_its_model(ws, home):
    (ws / "conda_dependencies.yml").write_text("channels:\n- conda-forge\ndependencies:\n- pip:\n  - pillow\n")
    out = control(ws, SEED_001_SETUP + """
curated_env_name = 'AzureML-PyTorch-1.6-GPU'
pytorch_env = Environment.get(workspace=ws, name=curated_env_name)
pytorch_env.save_to_directory(path=curated_env_name)
conda_env = Environment.from_conda_specification(name='pytorch-1.6-gpu', file_path='./conda_dependencies.yml')
pytorch_env = pytorch_env.clone(new_name='pytorch-1.6-gpu')
pytorch_env.python.user_managed_dependencies = True   # this interpreter has torch

from azureml.core import ScriptRunConfig

src = ScriptRunConfig(source_directory=project_folder,
                      script='pytorch_train.py',
                      arguments=['--num_epochs', 3, '--output_dir', './outputs'],
                      compute_target=compute_target,
                      environment=pytorch_env)
run = Experiment(ws, name='pytorch-birds').submit(src)
run.wait_for_completion(show_output=True)
print("METRICS", run.get_metrics())
model = run.register_model(model_name='pytorch-birds', model_path='outputs/model.pt')
print("MODEL", model.name, model.version)
os.makedirs('./model', exist_ok=True)
run.download_file(name='outputs/model.pt', output_file_path='./model/model.pt'),
print("RUN", run.id)
""")
    assert "Creating a new compute target..." in out.stdout
    assert (ws / ".mltrain" / "compute" / "gpu-cluster.yaml").is_file()  # the target is a file the user can edit
    assert "maps to this machine" in out.stderr
    # the curated environment written out as Azure writes it
    saved = ws / "AzureML-PyTorch-1.6-GPU"
    assert "torch==1.6.0" in (saved / "conda_dependencies.yml").read_text()
    assert json.loads((saved / "azureml_environment.json").read_text())["name"] == "AzureML-PyTorch-1.6-GPU"
    # the script's own output streamed by wait_for_completion(show_output=True), then the final status
    assert "trained for 3 epochs" in out.stdout and "Status: Completed" in out.stdout
    assert "METRICS {'loss': [1.0, 0.5, 0.3333333333333333], 'best_val_acc': 0.75}" in out.stdout
    assert "MODEL pytorch-birds 1" in out.stdout
    assert (ws / "model" / "model.pt").read_bytes() == b"weights of 3"
    run_id = out.stdout.split("RUN ", 1)[1].split()[0]
    record = run_json(home, run_id)
    assert record["status"] == "Completed" and record["experiment"] == "pytorch-birds"
    line = next(i for i, text in enumerate((ws / "control.py").read_text().splitlines(), 1) if ".submit(src)" in text)
    assert record["origin"] == {"front_end": "azureml-v1", "file": str(ws / "control.py"), "line": line}
    # the same run as every other front end's: in `mltrain runs list` and the registry
    listed = run_mltrain("runs", "list", cwd=ws)
    assert run_id in listed.out
    models = run_mltrain("models", "list", cwd=ws)
    assert "pytorch-birds" in models.out
    # a second run of the script finds the compute target the first one made
    again = control(ws, SEED_001_SETUP + "print('TARGET', compute_target.name, compute_target.kind)\n")
    assert "Found existing compute target" in again.stdout and "TARGET gpu-cluster local" in again.stdout


def test_seed_001_pytorch_configuration_runs_gloo_ranks_and_nccl_is_refused_without_a_gpu(ws, home):
    out = control(ws, """\
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.core.runconfig import PyTorchConfiguration
from azureml.exceptions import UserErrorException

ws = Workspace.from_config()
env = Environment('local-torch')
env.python.user_managed_dependencies = True
args = ['--dist-backend', 'gloo',
        '--dist-url', '$AZ_BATCHAI_PYTORCH_INIT_METHOD',
        '--rank', '$AZ_BATCHAI_TASK_INDEX',
        '--world-size', 2]
src = ScriptRunConfig(source_directory='.', script='allreduce.py', arguments=args, compute_target='local',
                      environment=env,
                      distributed_job_config=PyTorchConfiguration(communication_backend='Gloo', process_count=2))
run = Experiment(ws, name='ddp').submit(src)
details = run.wait_for_completion()
print("STATUS", details['status'], "RUN", run.id)
try:
    ScriptRunConfig(source_directory='.', script='allreduce.py', arguments=args, compute_target='local',
                    environment=env,
                    distributed_job_config=PyTorchConfiguration(communication_backend='Nccl', node_count=1))
    Experiment(ws, name='ddp').submit(ScriptRunConfig(
        source_directory='.', script='allreduce.py', arguments=args, compute_target='local', environment=env,
        distributed_job_config=PyTorchConfiguration(communication_backend='Nccl', node_count=1)))
except UserErrorException as exc:
    print("REFUSED", exc)
""")
    assert "STATUS Completed" in out.stdout
    run_dir = home / "runs" / out.stdout.split("RUN ", 1)[1].split()[0]
    logs = [(run_dir / "logs" / f"rank_{r}.log").read_text() for r in (0, 1)]
    assert "allreduce rank=0 world=2 sum=3" in logs[0] and "allreduce rank=1 world=2 sum=3" in logs[1]
    refused = out.stdout.split("REFUSED ", 1)[1].splitlines()[0]
    assert "nccl" in refused and "GPU" in refused


WHERE = """\
import os, sys
print("WHERE", " ".join(sys.argv[1:]), "| rank", os.environ["RANK"], "node", os.environ["NODE_RANK"],
      "local", os.environ["LOCAL_RANK"], "world", os.environ["WORLD_SIZE"])
"""


def test_a_list_command_is_joined_as_azure_joins_it_and_runs_on_two_simulated_nodes(ws, home):
    """A list command's items are joined with spaces as Azure joins them (one item may hold several words:
    `command=['python train.py --epochs 30']`, as MachineLearningNotebooks' CommandStep notebook writes it),
    and a two-node PyTorchConfiguration runs here on two simulated nodes, as a ScriptRunConfig and as a
    CommandStep of a pipeline."""
    (ws / "src").mkdir()
    (ws / "src" / "where.py").write_text(WHERE)
    out = control(ws, """\
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.core.runconfig import PyTorchConfiguration
from azureml.pipeline.core import Pipeline
from azureml.pipeline.steps import CommandStep

ws = Workspace.from_config()
env = Environment('local-torch')
env.python.user_managed_dependencies = True
src = ScriptRunConfig(source_directory='src', command=['python where.py --epochs 30', 2], compute_target='local',
                      environment=env,
                      distributed_job_config=PyTorchConfiguration(process_count=2, node_count=2,
                                                                  communication_backend='Gloo'))
run = Experiment(ws, name='two-nodes').submit(src)
print("STATUS", run.wait_for_completion()['status'], "RUN", run.id)
pipeline_run = Experiment(ws, 'two-nodes-pipeline').submit(
    Pipeline(workspace=ws, steps=[CommandStep(name='train', runconfig=src)]))
pipeline_run.wait_for_completion(show_output=False)
print("PIPELINE", pipeline_run.get_status(), pipeline_run.id)
""")
    assert "STATUS Completed" in out.stdout, out.stdout
    assert "PIPELINE Completed" in out.stdout, out.stdout
    run_id = out.stdout.split("RUN ", 1)[1].split()[0]
    pipeline_id = out.stdout.split("PIPELINE Completed ", 1)[1].split()[0]
    for run_dir in (home / "runs" / run_id, home / "runs" / f"{pipeline_id}.train"):
        logs = [(run_dir / "logs" / f"rank_{r}.log").read_text().strip() for r in (0, 1)]
        assert logs == ["WHERE --epochs 30 2 | rank 0 node 0 local 0 world 2",
                        "WHERE --epochs 30 2 | rank 1 node 1 local 0 world 2"], (run_dir, logs)


def test_seed_001_mpi_configuration_runs_a_horovod_script(ws, home):
    require_horovod()
    out = control(ws, """\
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.core.runconfig import MpiConfiguration

ws = Workspace.from_config()
env = Environment('hvd')
env.python.user_managed_dependencies = True
src = ScriptRunConfig(source_directory='.', script='hvd_mnist.py', arguments=['--epochs', 1],
                      compute_target='local', environment=env,
                      distributed_job_config=MpiConfiguration(process_count_per_node=2, node_count=1))
run = Experiment(ws, name='hvd').submit(src)
print("STATUS", run.wait_for_completion(show_output=True)['status'], "RUN", run.id)
""", timeout=600)
    assert "STATUS Completed" in out.stdout
    record = run_json(home, out.stdout.split("RUN ", 1)[1].split()[0])
    assert record["backend"] == "mpi" and record["world"]["world_size"] == 2


def test_seed_002_pytorch_estimator_single_node_and_its_gpu_refusal(ws, home):
    out = control(ws, """\
from azureml.core import Workspace, Experiment
from azureml.train.dnn import PyTorch
from azureml.exceptions import UserErrorException

ws = Workspace.from_config()
script_params = {'--num_epochs': 2, '--output_dir': './outputs'}
pt_est = PyTorch(source_directory='.', script_params=script_params, compute_target='local',
                 entry_script='pytorch_train.py', use_gpu=False)
run = Experiment(ws, name='estimator').submit(pt_est)
print("STATUS", run.wait_for_completion(show_output=True)['status'])
print("METRICS", run.get_metrics())
try:
    Experiment(ws, name='estimator').submit(PyTorch(source_directory='.', script_params=script_params,
                                                    compute_target='local', entry_script='pytorch_train.py',
                                                    use_gpu=True))
except UserErrorException as exc:
    print("REFUSED", exc)
""")
    assert "trained for 2 epochs" in out.stdout and "STATUS Completed" in out.stdout
    assert "'loss': [1.0, 0.5]" in out.stdout
    refused = out.stdout.split("REFUSED ", 1)[1].splitlines()[0]
    assert refused == "job.use_gpu: true, but no GPU is visible on this machine (compute=local)"


def test_seed_002_horovod_estimator(ws, home):
    require_horovod()
    out = control(ws, """\
from azureml.core import Workspace, Experiment
from azureml.train.dnn import PyTorch

ws = Workspace.from_config()
estimator = PyTorch(source_directory='.', compute_target='local', script_params={'--epochs': 1},
                    entry_script='hvd_mnist.py', node_count=1, process_count_per_node=2,
                    distributed_backend='mpi', use_gpu=False)
run = Experiment(ws, name='hvd-estimator').submit(estimator)
print("STATUS", run.wait_for_completion()['status'], "RUN", run.id)
""", timeout=600)
    assert "STATUS Completed" in out.stdout
    record = run_json(home, out.stdout.split("RUN ", 1)[1].split()[0])
    assert record["backend"] == "mpi" and record["world"]["world_size"] == 2


PIPELINE = """\
from azureml.core import Workspace, Experiment
from azureml.core.compute import ComputeTarget
from azureml.pipeline.core import Pipeline, PipelineData, PipelineParameter
from azureml.pipeline.steps import MpiStep, PythonScriptStep

ws = Workspace.from_config()
compute_target = ComputeTarget(workspace=ws, name="mpi-cluster")
prepared = PipelineData("prepared", datastore=ws.get_default_datastore())
model = PipelineData("model", datastore=ws.get_default_datastore())
scale = PipelineParameter(name="scale", default_value=3)
prep = PythonScriptStep(name="prep", script_name="prep.py", source_directory="steps",
                        arguments=["--out", prepared, "--scale", scale], outputs=[prepared],
                        compute_target=compute_target, params={"mode": "fast"}, allow_reuse=True)
train = MpiStep(name="train", source_directory="steps", script_name="train_mpi.py",
                arguments=["--data", prepared, "--model", model], compute_target=compute_target,
                node_count=1, process_count_per_node=2, inputs=[prepared], outputs=[model],
                allow_reuse=True, version="1", hash_paths=["train_mpi.py"], use_gpu=False, use_docker=False,
                user_managed=True, conda_packages=[], pip_packages=[])
pipeline = Pipeline(workspace=ws, steps=[train])      # prep comes in through train's input
for attempt in range(2):
    run = Experiment(ws, "mpi-pipeline").submit(pipeline)
    run.wait_for_completion(show_output=False)
    print("PIPELINE", attempt, run.get_status(), run.id)
    for step in run.get_steps():
        print("STEP", attempt, step.name, step.get_status(), "reused" if step.reused else "ran", "|", step.reuse_reason)
"""

PREP = """\
import argparse, os
p = argparse.ArgumentParser(); p.add_argument("--out"); p.add_argument("--scale"); a = p.parse_args()
os.makedirs(a.out, exist_ok=True)
with open(os.path.join(a.out, "data.txt"), "w") as f:
    f.write(a.scale + " " + os.environ["AML_PARAMETER_mode"] + "\\n")
"""

TRAIN_MPI = """\
import argparse, os
from mpi4py import MPI
p = argparse.ArgumentParser(); p.add_argument("--data"); p.add_argument("--model"); a = p.parse_args()
comm = MPI.COMM_WORLD
text = open(os.path.join(a.data, "data.txt")).read().strip()
total = comm.allreduce(comm.Get_rank() + 1)
print(f"rank {comm.Get_rank()} of {comm.Get_size()} read '{text}', allreduce {total}", flush=True)
if comm.Get_rank() == 0:
    os.makedirs(a.model, exist_ok=True)
    open(os.path.join(a.model, "model.txt"), "w").write(f"{text} x{comm.Get_size()}\\n")
"""


def pipeline_project(ws: Path, compute_yaml: str) -> None:
    (ws / "steps").mkdir()
    (ws / "steps" / "prep.py").write_text(PREP)
    (ws / "steps" / "train_mpi.py").write_text(TRAIN_MPI)
    (ws / ".mltrain" / "compute").mkdir(parents=True, exist_ok=True)
    (ws / ".mltrain" / "compute" / "mpi-cluster.yaml").write_text(compute_yaml)


def check_pipeline_twice(out: subprocess.CompletedProcess, home: Path) -> dict:
    """The pipeline ran its two steps, then reused both, saying why; returns the first train step's run.json."""
    steps = [line.split() for line in out.stdout.splitlines() if line.startswith("STEP ")]
    assert [s[1:5] for s in steps] == [["0", "train", "Completed", "ran"], ["0", "prep", "Completed", "ran"],
                                       ["1", "train", "Completed", "reused"], ["1", "prep", "Completed", "reused"]]
    reasons = [line.split("|", 1)[1] for line in out.stdout.splitlines() if line.startswith("STEP 1")]
    assert all("same key" in r and "unchanged" in r for r in reasons), reasons
    first = next(line.split()[3] for line in out.stdout.splitlines() if line.startswith("PIPELINE 0"))
    train = home / "runs" / f"{first}.train"
    assert (train / "outputs" / "model" / "model.txt").read_text() == "3 fast x2\n"
    logs = (train / "logs" / "rank_1.log").read_text()
    assert "rank 1 of 2 read '3 fast', allreduce 3" in logs
    return dict(json.loads((train / "run.json").read_text()))


def test_seed_000_mpistep_pipeline_runs_under_mpirun_and_is_reused_the_second_time(ws, home):
    require_mpi()
    pipeline_project(ws, "defaults: [local_schema, _self_]\n")
    out = control(ws, PIPELINE)
    train = check_pipeline_twice(out, home)
    assert train["backend"] == "mpi" and train["mpi"]["mpirun"][:3] == ["mpirun", "-np", "2"]


HYPERDRIVE_TRAIN = """\
import argparse, time
from azureml.core.run import Run
p = argparse.ArgumentParser()
p.add_argument("--learning_rate", type=float)
p.add_argument("--batch-size", type=int)
p.add_argument("--epochs", type=int)
a = p.parse_args()
run = Run.get_context()
run.log("learning_rate", a.learning_rate)
for epoch in range(a.epochs):
    run.log("accuracy", a.learning_rate * (epoch + 1))
    time.sleep(0.4)
import os
os.makedirs("outputs", exist_ok=True)
open("outputs/model.txt", "w").write(str(a.learning_rate))
"""


def test_hyperdrive_flow_with_bandit_best_run_metrics_and_registration(ws, home):
    (ws / "train_hd.py").write_text(HYPERDRIVE_TRAIN)
    out = control(ws, """\
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.train.hyperdrive import RandomParameterSampling, BanditPolicy, HyperDriveConfig, PrimaryMetricGoal
from azureml.train.hyperdrive import choice, uniform

ws = Workspace.from_config()
env = Environment('local'); env.python.user_managed_dependencies = True
src = ScriptRunConfig(source_directory='.', script='train_hd.py', arguments=['--epochs', 5],
                      compute_target='local', environment=env)
param_sampling = RandomParameterSampling({
    'learning_rate': choice(0.01, 0.02, 0.1, 0.2),
    '--batch-size': choice(16, 32),
}, properties={'seed': 7})
early_termination_policy = BanditPolicy(evaluation_interval=1, slack_factor=0.1, delay_evaluation=1)
hyperdrive_config = HyperDriveConfig(run_config=src, hyperparameter_sampling=param_sampling,
                                     policy=early_termination_policy, primary_metric_name='accuracy',
                                     primary_metric_goal=PrimaryMetricGoal.MAXIMIZE, max_total_runs=6,
                                     max_concurrent_runs=3)
hyperdrive_run = Experiment(ws, 'hd').submit(hyperdrive_config)
hyperdrive_run.wait_for_completion(show_output=False)
best_run = hyperdrive_run.get_best_run_by_primary_metric()
best_run_metrics = best_run.get_metrics()
print("BEST", best_run.id, best_run_metrics['learning_rate'], best_run_metrics['accuracy'][-1])
for row in hyperdrive_run.get_children_sorted_by_primary_metric():
    print("CHILD", row['status'], row['best_primary_metric'], row['hyperparameters'])
model = best_run.register_model(model_name='hd-best', model_path='outputs/model.txt')
print("MODEL", model.name, model.version)
""", timeout=400)
    children = [line.split(maxsplit=3)[1:] for line in out.stdout.splitlines() if line.startswith("CHILD ")]
    assert len(children) == 6
    statuses = [c[0] for c in children]
    assert "Canceled" in statuses, out.stdout  # the bandit stopped members far behind the best
    best = out.stdout.split("BEST ", 1)[1].split()
    # get_metrics(): a value for a metric logged once, a list for one logged every epoch
    completed = [float(c[1]) for c in children if c[0] == "Completed"]
    assert float(best[1]) == max(float(json.loads(c[2])["learning_rate"]) for c in children if c[0] == "Completed")
    assert float(best[2]) == pytest.approx(max(completed))
    assert "MODEL hd-best 1" in out.stdout
    # each member received its sampled values as arguments, Azure's way
    first = json.loads(children[0][2])
    assert set(first) == {"learning_rate", "--batch-size"}


def test_what_cannot_run_here_is_one_line_naming_the_call(ws, home):
    out = control(ws, """\
from azureml.core import Workspace, Model, Run
from azureml.core.model import InferenceConfig
from azureml.core.webservice import AciWebservice
from azureml.core.compute import ComputeTarget
from azureml.core.compute_target import ComputeTargetException

ws = Workspace.from_config()
calls = [lambda: Model.package(ws, [], None),
         lambda: InferenceConfig(entry_script='score.py', extra_docker_file_steps='steps.txt'),
         lambda: AciWebservice.deploy_from_model(ws, 'svc', [], None),
         lambda: Run.get_context().get_snapshot_id()]
for call in calls:
    try:
        call()
    except NotImplementedError as exc:
        print("ONE", str(exc).count("\\n"), exc)
try:
    ComputeTarget(workspace=ws, name='nowhere')
except ComputeTargetException as exc:
    print("MISSING", exc)
""")
    lines = [line for line in out.stdout.splitlines() if line.startswith("ONE ")]
    assert len(lines) == 4 and all(line.startswith("ONE 0 ") for line in lines)
    for name in ("Model.package", "InferenceConfig(extra_docker_file_steps=...)", "Webservice.deploy_from_model",
                 "Run.get_snapshot_id"):
        assert any(f"ONE 0 {name} is not available in mltrain's Azure ML stand-in" in line for line in lines), name
    assert "MISSING ComputeTargetNotFound: Compute Target with name nowhere not found in provided workspace" in out.stdout


def test_bad_input_is_one_exception_before_anything_runs(ws, home):
    (ws / "old.yml").write_text("dependencies:\n- python=3.6.2\n- pip:\n  - torch==1.6.0\n")
    out = control(ws, """\
from azureml.core import Workspace, Experiment, Environment, ScriptRunConfig
from azureml.core.runconfig import TensorflowConfiguration
from azureml.exceptions import UserErrorException, RunConfigurationException

ws = Workspace.from_config()
cases = {
    "missing script": ScriptRunConfig(source_directory='.', script='nope.py', compute_target='local'),
    "old pins": ScriptRunConfig(source_directory='.', script='pytorch_train.py', compute_target='local',
                                environment=Environment.from_conda_specification('old', 'old.yml')),
    "unknown compute": ScriptRunConfig(source_directory='.', script='pytorch_train.py', compute_target='gpu-x'),
    "parameter servers": ScriptRunConfig(source_directory='.', script='pytorch_train.py', compute_target='local',
                                         distributed_job_config=TensorflowConfiguration(worker_count=2)),
}
for name, config in cases.items():
    try:
        Experiment(ws, 'bad').submit(config)
        print("ACCEPTED", name)
    except (UserErrorException, RunConfigurationException, Exception) as exc:
        print("REFUSED", name, "|", type(exc).__name__, "|", exc)
""")
    refused = {line.split("|")[0][len("REFUSED "):].strip(): line for line in out.stdout.splitlines()
               if line.startswith("REFUSED ")}
    assert set(refused) == {"missing script", "old pins", "unknown compute", "parameter servers"}, out.stdout
    assert "job.script: file 'nope.py' does not exist" in refused["missing script"]
    assert "Python 3.6.2" in refused["old pins"]
    assert "ComputeTargetException" in refused["unknown compute"]
    assert "parameter_server_count=1" in refused["parameter servers"]
    assert not (home / "runs").exists() or not any((home / "runs").glob("bad_*")), "a refused submission made a run"


def test_a_real_azureml_core_always_wins_over_the_stand_ins(tmp_path):
    real = tmp_path / "site" / "azureml" / "core"
    real.mkdir(parents=True)
    (real / "__init__.py").write_text("WHO = 'the real azureml-core'\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run([sys.executable, "-c", "import azureml.core; print(azureml.core.WHO)"], env=env,
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "the real azureml-core"


def test_datasets_datastores_run_history_and_widgets(ws, home):
    (ws / "images").mkdir()
    for i in range(3):
        (ws / "images" / f"{i}.txt").write_text(str(i))
    (ws / "count.py").write_text(
        "import os, sys\nfrom azureml.core.run import Run\n"
        "files = sorted(os.listdir(sys.argv[2]))\nprint('FILES', sys.argv[1], files)\n"
        "Run.get_context().log('files', len(files))\n")
    out = control(ws, """\
from azureml.core import Dataset, Datastore, Environment, Experiment, ScriptRunConfig, Workspace
from azureml.widgets import RunDetails

ws = Workspace.from_config()
datastore = ws.get_default_datastore()
datastore.upload(src_dir='images', target_path='birds', overwrite=True, show_progress=True)
dataset = Dataset.File.from_files(path=(datastore, 'birds'))
dataset = dataset.register(ws, 'birds', create_new_version=True)
env = Environment('local'); env.python.user_managed_dependencies = True
experiment = Experiment(ws, 'data')
for mode in ('download', 'mount'):
    item = dataset.as_named_input('birds')
    item = item.as_download() if mode == 'download' else item.as_mount()
    src = ScriptRunConfig(source_directory='.', script='count.py', arguments=[mode, item], environment=env)
    run = experiment.submit(src, tags={'mode': mode})
    run.wait_for_completion()
print("RUNS", [(r.get_tags()['mode'], r.get_status()) for r in experiment.get_runs()])
print("AGAIN", Dataset.get_by_name(ws, 'birds').to_path())
RunDetails(run).show()
""")
    assert "Uploaded 3 files" in out.stdout
    assert "RUNS [('mount', 'Completed'), ('download', 'Completed')]" in out.stdout  # newest first
    assert "AGAIN ['/0.txt', '/1.txt', '/2.txt']" in out.stdout
    assert (ws / ".mltrain" / "data" / "birds.yaml").is_file()
    table = out.stdout.split("AGAIN", 1)[1]
    assert "Completed" in table and "files" in table and "3" in table
    logs = sorted((home / "runs").glob("data_*/logs/rank_0.log"))
    assert any("FILES download ['0.txt', '1.txt', '2.txt']" in p.read_text() for p in logs)


def test_a_built_environment_still_has_run_get_context(ws, home):
    """An environment mltrain builds (a virtual environment of its own) gets the stand-ins on its path
    too: the training script's `from azureml.core.run import Run` works there, as on Azure."""
    (ws / "requirements.txt").write_text("six==1.16.0\n")
    (ws / "uses_six.py").write_text(
        "import six\nfrom azureml.core.run import Run\nrun = Run.get_context()\nrun.log('six', six.__version__)\n"
        "import sys\nprint('PYTHON', sys.prefix)\n")
    out = control(ws, """\
from azureml.core import Environment, Experiment, ScriptRunConfig, Workspace

ws = Workspace.from_config()
env = Environment.from_pip_requirements(name='with-six', file_path='requirements.txt')
run = Experiment(ws, 'built').submit(ScriptRunConfig(source_directory='.', script='uses_six.py', environment=env))
run.wait_for_completion(show_output=True)
print("METRICS", run.get_metrics())
""", timeout=600)
    assert "METRICS {'six': '1.16.0'}" in out.stdout
    prefix = out.stdout.split("PYTHON ", 1)[1].split()[0]
    assert prefix != sys.prefix  # the run's own environment, not mltrain's
