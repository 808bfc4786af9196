"""The azure-ai-ml scripts of test_azureml_sdk_v2.py, unmodified, on the test Slurm cluster: the compute
names they use (`gpu-cluster`, the pipeline's `default_compute="cpu-cluster"`) mapped to Slurm in the
project's `.mltrain/compute/`. A 2-rank PyTorch command is one Slurm job; a sweep's trials and a
pipeline's steps are Slurm jobs."""
from __future__ import annotations

import pytest
from slurm_support import require_cluster, sacct_settles
from test_azureml_sdk_v2 import check_ddp, check_pipeline, check_sweep, sdk_project

pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
pytestmark = pytest.mark.slow
SLURM = "defaults: [slurm_schema, _self_]\npoll_s: 0.3\n"


@pytest.fixture(autouse=True)
def _cluster():
    require_cluster()


def test_distributed_pytorch_command_on_slurm(home, project):
    sdk_project(project, SLURM)
    run = check_ddp(home, project)
    assert sacct_settles(run["slurm"]["job_id"]) == "COMPLETED"


@pytest.mark.tracking  # the trials' mlflow.log_metric reach the sweep through the MLflow mirror
def test_sweep_on_slurm(home, project):
    sdk_project(project, SLURM)
    doc = check_sweep(home, project)
    from support import runs

    trials = [r for r in runs(home) if r["id"] in {m["run_id"] for m in doc["members"]}]
    assert trials and all(r.get("slurm", {}).get("job_id") for r in trials)


def test_pipeline_on_slurm(home, project):
    sdk_project(project, SLURM)
    steps = check_pipeline(home, project)
    assert all(s.get("slurm", {}).get("job_id") for s in steps.values())
