"""The seeds' v1 control code on the test Slurm cluster: the workspace's compute targets map to Slurm
(`.mltrain/compute/default.yaml` names the cluster, and ComputeTarget.create maps new targets to it),
and nothing else in the control script changes."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from horovod_support import require_horovod
from slurm_support import require_cluster, sacct_settles
from test_azureml_v1 import (
    PIPELINE,
    SEED_001_SETUP,
    check_pipeline_twice,
    control,
    make_workspace,
    pipeline_project,
    run_json,
)


@pytest.fixture
def ws(project, home) -> Path:
    return make_workspace(project)


SLURM = "defaults: [slurm_schema, _self_]\npoll_s: 0.3\n"


def test_seed_001_on_slurm_through_a_compute_target_created_from_the_default(ws, home):
    require_cluster()
    (ws / ".mltrain" / "compute").mkdir(parents=True)
    (ws / ".mltrain" / "compute" / "default.yaml").write_text(SLURM)
    out = control(ws, SEED_001_SETUP + """
from azureml.core import Environment, ScriptRunConfig
from azureml.core.runconfig import PyTorchConfiguration

env = Environment('this-python'); env.python.user_managed_dependencies = True
src = ScriptRunConfig(source_directory=project_folder, script='pytorch_train.py',
                      arguments=['--num_epochs', 2, '--output_dir', './outputs'],
                      compute_target=compute_target, environment=env)
run = Experiment(ws, name='pytorch-birds').submit(src)
run.wait_for_completion(show_output=True)
run.download_file(name='outputs/model.pt', output_file_path='./model.pt')
print("RUN", run.id, compute_target.kind)
args = ['--dist-backend', 'gloo', '--dist-url', '$AZ_BATCHAI_PYTORCH_INIT_METHOD',
        '--rank', '$AZ_BATCHAI_TASK_INDEX', '--world-size', 2]
shutil.copy('allreduce.py', project_folder)
ddp = ScriptRunConfig(source_directory=project_folder, script='allreduce.py', arguments=args,
                      compute_target=compute_target, environment=env,
                      distributed_job_config=PyTorchConfiguration(communication_backend='Gloo', process_count=2))
run = Experiment(ws, name='ddp').submit(ddp)
print("DDP", run.wait_for_completion()['status'], run.id)
""", timeout=400)
    assert "maps to slurm (default.yaml)" in out.stderr
    run_id, kind = out.stdout.split("RUN ", 1)[1].split()[:2]
    assert kind == "slurm" and (ws / "model.pt").read_bytes() == b"weights of 2"
    record = run_json(home, run_id)
    assert record["backend"] == "slurm" and record["status"] == "Completed"
    assert sacct_settles(record["slurm"]["job_id"]) == "COMPLETED"
    ddp_id = out.stdout.split("DDP Completed ", 1)[1].split()[0]
    ddp = home / "runs" / ddp_id
    assert "sum=3" in (ddp / "logs" / "rank_0.log").read_text() and "sum=3" in (ddp / "logs" / "rank_1.log").read_text()
    assert json.loads((ddp / "run.json").read_text())["backend"] == "slurm"


def test_seed_000_mpistep_pipeline_on_slurm_is_reused_the_second_time(ws, home):
    require_cluster()
    pipeline_project(ws, SLURM)
    out = control(ws, PIPELINE, timeout=400)
    train = check_pipeline_twice(out, home)
    assert train["backend"] == "slurm" and train["slurm"]["job_id"]


def test_seed_002_estimators_on_slurm_single_node_and_horovod(ws, home):
    require_horovod()
    require_cluster()
    (ws / ".mltrain" / "compute").mkdir(parents=True)
    (ws / ".mltrain" / "compute" / "gpu-cluster.yaml").write_text(SLURM)
    out = control(ws, """\
from azureml.core import Workspace, Experiment
from azureml.core.compute import ComputeTarget
from azureml.train.dnn import PyTorch

ws = Workspace.from_config()
compute_target = ComputeTarget(workspace=ws, name='gpu-cluster')
script_params = {'--num_epochs': 2, '--output_dir': './outputs'}
pt_est = PyTorch(source_directory='.', script_params=script_params, compute_target=compute_target,
                 entry_script='pytorch_train.py', use_gpu=False)
run = Experiment(ws, name='estimator').submit(pt_est)
print("SINGLE", run.wait_for_completion(show_output=True)['status'], run.id)
estimator = PyTorch(source_directory='.', compute_target=compute_target, script_params={'--epochs': 1},
                    entry_script='hvd_mnist.py', node_count=1, process_count_per_node=2,
                    distributed_backend='mpi', use_gpu=False)
run = Experiment(ws, name='estimator').submit(estimator)
print("HOROVOD", run.wait_for_completion()['status'], run.id)
""", timeout=600)
    single = out.stdout.split("SINGLE ", 1)[1].split()
    horovod = out.stdout.split("HOROVOD ", 1)[1].split()
    assert single[0] == "Completed" and horovod[0] == "Completed", out.stdout[-3000:]
    for run_id in (single[1], horovod[1]):
        record = run_json(home, run_id)
        assert record["backend"] == "slurm" and sacct_settles(record["slurm"]["job_id"]) == "COMPLETED"
    assert run_json(home, horovod[1])["world"]["world_size"] == 2
