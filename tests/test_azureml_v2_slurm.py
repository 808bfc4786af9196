"""Azure ML v2 job files on the test Slurm cluster: `compute: azureml:NAME` mapped to Slurm in the
repository's .mltrain/compute/, a 2-rank pytorch job, a 2-rank mpi job, instance_count 2 on the two-node
cluster, a pipeline of component files queued as one graph, 2-worker tensorflow jobs (TF_CONFIG, on one node and two), a
queued graph stopped at its first failed step (continue_on_step_failure unset), and a sweep step whose trials
run on the cluster."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from slurm_support import require_cluster, sacct_settles
from support import only_run, require, run_mltrain, runs
from test_azureml_v2 import _pipeline_project, write

pytestmark = pytest.mark.slow
GPU_CLUSTER = "defaults: [slurm_schema, _self_]\npoll_s: 0.3\n"
DDP = """\
command: >-
  python allreduce.py --dist-url $AZ_BATCHAI_PYTORCH_INIT_METHOD --rank $RANK --world-size $WORLD_SIZE
code: .
compute: azureml:gpu-cluster
resources:
  instance_count: {nodes}
distribution:
  type: pytorch
  process_count_per_instance: {per}
"""


@pytest.fixture(autouse=True)
def _cluster():
    require_cluster()


def _job(project: Path, text: str, *extra: str, env=None):
    write(project, ".mltrain/compute/gpu-cluster.yaml", GPU_CLUSTER)
    write(project, "job.yml", text)
    return run_mltrain("job", "create", "--file", "job.yml", *extra, cwd=project, timeout=240, env=env)


def test_mapped_compute_runs_a_two_rank_pytorch_job_on_slurm(home, project):
    r = _job(project, DDP.format(nodes=1, per=2))
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed" and sacct_settles(run["slurm"]["job_id"]) == "COMPLETED"
    logs = Path(run["dir"]) / "logs"
    for rank in (0, 1):
        assert f"allreduce rank={rank} world=2 sum=3" in (logs / f"rank_{rank}.log").read_text()


def test_two_rank_mpi_job_on_slurm(home, project):
    from mpi_support import require_mpi

    require_mpi()
    r = _job(project, "command: python mpi_allreduce.py\ncode: .\ncompute: azureml:gpu-cluster\n"
                      "distribution:\n  type: mpi\n  process_count_per_instance: 2\n")
    assert r.rc == 0, r.out + r.err
    assert "mpi rank=1 size=2 sum=3" in (Path(only_run(home)["dir"]) / "logs" / "rank_1.log").read_text()


def test_instance_count_two_on_the_two_node_cluster(home, project):
    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    r = _job(project, DDP.format(nodes=2, per=1), env={"SLURM_CONF": conf})
    assert r.rc == 0, r.out + r.err
    import json

    ranks = {p.stem: json.loads(p.read_text()) for p in (Path(only_run(home)["dir"]) / "ranks").glob("rank_*.json")}
    assert {ranks["rank_0"]["host"], ranks["rank_1"]["host"]} == {"n1", "n2"}


def test_pipeline_of_component_files_on_slurm_is_one_graph(home, project):
    _pipeline_project(project)
    r = run_mltrain("job", "create", "--file", "pipe/pipeline.yml", "compute=slurm", "compute.poll_s=0.3",
                    cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    steps = {x["id"].rsplit(".", 1)[1]: x for x in runs(home) if "." in x["id"]}
    assert set(steps) == {"prep", "train", "score"} and all(s["status"] == "Completed" for s in steps.values())
    assert (Path(steps["score"]["dir"]) / "outputs" / "result" / "data.txt").read_text() == "ABC" * 8 + "\n"


def test_tensorflow_job_on_slurm_gives_every_worker_tf_config(home, project):
    from test_azureml_v2_features import SHOW_TF_CONFIG, TENSORFLOW_JOB, check_tf_configs, tf_configs

    write(project, "show_tf.py", SHOW_TF_CONFIG)
    r = _job(project, TENSORFLOW_JOB.format(compute="compute: azureml:gpu-cluster\n"))
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    check_tf_configs(tf_configs(Path(run["dir"])))


def test_a_failed_step_stops_a_queued_graph(home, project):
    from test_azureml_v2_features import _branches

    r, steps, pipeline = _branches(home, project, "", "compute=slurm", "compute.poll_s=0.3", sleep=30)
    assert r.rc != 0, r.out + r.err
    status = {n: s["status"] for n, s in steps.items()}
    assert status == {"breaks": "Failed", "slow": "Canceled", "after_slow": "Canceled", "after_breaks": "Canceled"}
    assert "step breaks failed and continue_on_step_failure is false" in steps["slow"]["error"]
    assert pipeline["status"] == "Failed" and pipeline["error"] == "step breaks failed"


def req_cpus(job_id: str) -> int:
    """The CPUs Slurm's accounting says the job asked for (once it has recorded the job's end: before
    that it may answer 0)."""
    sacct_settles(job_id)
    deadline, cpus = time.monotonic() + 20, 0
    while time.monotonic() < deadline:
        out = subprocess.run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "ReqCPUS"], capture_output=True, text=True)
        cpus = int((out.stdout.split() or ["0"])[0])
        if cpus:
            break
        time.sleep(0.3)
    return cpus


def test_sweep_step_on_slurm_runs_its_trials_there(home, project):
    from test_azureml_v2_features import SWEEP_PIPELINE, SWEEP_TRIAL, TRIAL_COMPONENT

    write(project, "pipe/trial-src/trial.py", SWEEP_TRIAL)
    write(project, "pipe/trial.yml", TRIAL_COMPONENT)
    write(project, "pipe/pipeline.yml", SWEEP_PIPELINE)
    r = run_mltrain("job", "create", "--file", "pipe/pipeline.yml", "compute=slurm", "compute.poll_s=0.3",
                    "compute.cpus_per_task=2", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    found = {x["id"]: x for x in runs(home)}
    trials = [x for i, x in found.items() if "-sweep" in i]
    assert len(trials) == 3 and all(t["status"] == "Completed" and t["backend"] == "slurm" for t in trials)
    # the sweep step's own job only drives the trials: one CPU, whatever the compute asks for its runs
    tune = next(x for i, x in found.items() if i.endswith(".tune"))
    assert req_cpus(tune["slurm"]["job_id"]) == 1
    assert [req_cpus(t["slurm"]["job_id"]) for t in trials] == [2, 2, 2]
    use = next(x for i, x in found.items() if i.endswith(".use"))
    assert (Path(use["dir"]) / "outputs" / "report" / "report.txt").read_text() == "31 from scale 3\n"


def test_tensorflow_workers_on_two_nodes_each_name_their_own_node(home, project):
    from test_azureml_v2_features import SHOW_TF_CONFIG, TENSORFLOW_JOB, check_tf_configs, tf_configs

    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    write(project, "show_tf.py", SHOW_TF_CONFIG)
    text = TENSORFLOW_JOB.format(compute="compute: azureml:gpu-cluster\nresources:\n  instance_count: 2\n")
    r = _job(project, text, env={"SLURM_CONF": conf})
    assert r.rc == 0, r.out + r.err
    configs = tf_configs(Path(only_run(home)["dir"]))
    check_tf_configs(configs)
    assert [w.rsplit(":", 1)[0] for w in configs[0]["cluster"]["worker"]] == ["n1", "n2"]
