"""Azure ML's v2 Python SDK (azure-ai-ml) on mltrain: scripts written as Azure's notebooks write them
(`MLClient(...)`, `command(...)` with PyTorch distribution, `.sweep(...)` with Choice/Uniform and
MedianStoppingPolicy, `@dsl.pipeline` over components loaded from YAML), run unmodified with
MLTRAIN_AZUREML=1 in real processes: they stream, end Completed, and show in `mltrain runs list`. Without
the variable azure-ai-ml is Azure's own. The Slurm variants are in test_azureml_sdk_v2_slurm.py: the same
scripts, the compute names mapped to the cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import mltrain_exe, runs, until
from test_azureml_v2 import COMPONENT, STEP, write

pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
pytestmark = pytest.mark.slow

LOCAL = "defaults: [local_schema, _self_]\nmax_concurrent_jobs: 2\n"

DDP = """\
from azure.ai.ml import MLClient, command
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "00000000-0000-0000-0000-000000000000", "rg", "ws")
job = command(
    code=".",
    command="python allreduce.py --dist-url $AZ_BATCHAI_PYTORCH_INIT_METHOD --rank $RANK --world-size $WORLD_SIZE",
    compute="gpu-cluster",
    instance_count=1,
    distribution={"type": "PyTorch", "process_count_per_instance": 2},
    display_name="ddp-allreduce",
)
returned_job = ml_client.jobs.create_or_update(job, experiment_name="sdk-v2")
print("NAME", returned_job.name, returned_job.status, returned_job.studio_url)
ml_client.jobs.stream(returned_job.name)
print("FINAL", ml_client.jobs.get(returned_job.name).status)
print("LISTED", [j.name for j in ml_client.jobs.list()])
"""

TRIAL = """\
import argparse, time, mlflow
p = argparse.ArgumentParser()
p.add_argument("--quality"); p.add_argument("--lr", type=float); p.add_argument("--epochs", type=int)
a = p.parse_args()
for step in range(a.epochs):
    mlflow.log_metric("accuracy", (0.9 if a.quality == "good" else 0.1) * (step + 1) / a.epochs, step=step)
    time.sleep(0.2)
print("trial", a.quality, a.lr, a.epochs, flush=True)
"""

SWEEP = """\
from azure.ai.ml import MLClient, command
from azure.ai.ml.sweep import Choice, MedianStoppingPolicy, Uniform
from azure.identity import DefaultAzureCredential

ml_client = MLClient.from_config(credential=DefaultAzureCredential())
job = command(
    code="./src",
    command="python trial.py --quality ${{inputs.quality}} --lr ${{inputs.lr}} --epochs ${{inputs.epochs}}",
    inputs={"quality": "good", "lr": 0.01, "epochs": 3},
    compute="gpu-cluster",
    display_name="sweep-trial",
)
job_for_sweep = job(quality=Choice(values=["good", "bad"]), lr=Uniform(min_value=0.001, max_value=0.1))
sweep_job = job_for_sweep.sweep(
    compute="gpu-cluster",
    sampling_algorithm="random",
    primary_metric="accuracy",
    goal="Maximize",
    early_termination_policy=MedianStoppingPolicy(delay_evaluation=1, evaluation_interval=1),
)
sweep_job.set_limits(max_total_trials=4, max_concurrent_trials=2, timeout=600)
returned = ml_client.create_or_update(sweep_job)
print("NAME", returned.name, returned.status)
ml_client.jobs.stream(returned.name)
done = ml_client.jobs.get(returned.name)
print("FINAL", done.status)
print("BEST", done.properties["best_child_run_id"], done.properties["score"])  # Azure's notebooks read these
"""

PIPELINE = """\
from azure.ai.ml import Input, MLClient, dsl, load_component
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "00000000-0000-0000-0000-000000000000", "rg", "ws")
prep = load_component(source="./pipe/prep.yml")
train = load_component(source="./pipe/train.yml")
score = load_component(source="./pipe/score.yml")


@dsl.pipeline(default_compute="cpu-cluster", description="three components from YAML")
def three_steps(raw):
    a = prep(source=raw, factor=2)
    b = train(source=a.outputs.result, mode="lower")
    c = score(source=b.outputs.result)
    c.outputs.result.mode = "upload"
    return {"final": c.outputs.result}


pipeline_job = three_steps(raw=Input(type="uri_folder", path="./pipe/raw"))
returned = ml_client.jobs.create_or_update(pipeline_job, experiment_name="sdk-v2-pipeline")
print("NAME", returned.name, returned.status)
ml_client.jobs.stream(returned.name)
print("FINAL", ml_client.jobs.get(returned.name).status)
print("STEPS", sorted(j.name for j in ml_client.jobs.list(parent_job_name=returned.name)))
ml_client.jobs.download(returned.name, output_name="final", download_path="./downloaded")
"""


def sdk_project(project: Path, compute: str = LOCAL) -> None:
    """The scripts, their code, components (with a workspace environment `local-env`, as Azure requires
    one) and the compute names the scripts use, mapped in the project's `.mltrain/`."""
    write(project, "ddp_job.py", DDP)
    write(project, "sweep_job.py", SWEEP)
    write(project, "pipeline_job.py", PIPELINE)
    write(project, "src/trial.py", TRIAL)
    write(project, "pipe/src/step.py", STEP)
    write(project, "pipe/raw/data.txt", "abc\n")
    for name in ("prep", "train", "score"):
        text = COMPONENT.format(name=name).replace("code: ./src\n", "code: ./src\nenvironment: azureml:local-env@latest\n")
        write(project, f"pipe/{name}.yml", text)
    write(project, ".mltrain/environment/local-env.yaml", "name: local-env\npython:\n  user_managed: true\n")
    write(project, ".mltrain/compute/gpu-cluster.yaml", compute)
    write(project, ".mltrain/compute/cpu-cluster.yaml", compute)
    write(project, "config.json", json.dumps({"subscription_id": "0000", "resource_group": "rg", "workspace_name": "ws"}))


def run_script(project: Path, script: str, *args: str, select: bool = True, timeout: float = 240):
    env = {k: v for k, v in os.environ.items() if k != "MLTRAIN_AZUREML"}
    if select:
        env["MLTRAIN_AZUREML"] = "1"
    return subprocess.run([sys.executable, script, *args], cwd=project, capture_output=True, text=True,
                          timeout=timeout, env=env)


def value(out: str, key: str) -> str:
    return next(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(key + " "))


def check_ddp(home: Path, project: Path) -> dict:
    p = run_script(project, "ddp_job.py")
    assert p.returncode == 0, p.stdout + p.stderr
    name = value(p.stdout, "NAME").split()[0]
    assert "allreduce rank=0 world=2 sum=3" in p.stdout and "Status: Completed" in p.stdout  # streamed, rank 0
    assert value(p.stdout, "FINAL") == "Completed" and name in value(p.stdout, "LISTED")
    run = next(r for r in runs(home) if r["id"] == name)
    assert run["status"] == "Completed" and run["origin"]["front_end"] == "azureml-sdk-v2"
    assert "allreduce rank=1 world=2 sum=3" in (Path(run["dir"]) / "logs" / "rank_1.log").read_text()
    listed = subprocess.run(mltrain_exe() + ["runs", "list"], cwd=project, capture_output=True, text=True, timeout=60)
    assert name in listed.stdout, listed.stdout + listed.stderr
    write(project, "later.py", f"from azure.ai.ml import MLClient\nj = MLClient.from_config(None).jobs.get({name!r})\n"
                               "print('LATER', type(j).__name__, j.status)\n")
    later = run_script(project, "later.py", timeout=120)  # another process finds the job by its name
    assert value(later.stdout, "LATER") == "CommandJob Completed", later.stdout + later.stderr
    return run


def check_sweep(home: Path, project: Path) -> dict:
    p = run_script(project, "sweep_job.py")
    assert p.returncode == 0, p.stdout + p.stderr
    name = value(p.stdout, "NAME").split()[0]
    assert value(p.stdout, "FINAL") == "Completed" and "Status: Completed" in p.stdout
    doc = json.loads((home / "runs" / "_sweeps" / name / "sweep.json").read_text())
    members = doc["members"]
    assert len(members) == 4
    for m in members:
        assert m["params"]["job.params.quality"] in ("good", "bad") and 0.001 <= m["params"]["job.params.lr"] <= 0.1
    for m in members:  # a trial the median policy stopped is Canceled; one that ran has its quality's accuracy
        assert m["status"] in ("Completed", "Canceled"), members
        if m["status"] == "Completed" and m["best"] is not None:
            assert m["best"] == pytest.approx(0.9 if m["params"]["job.params.quality"] == "good" else 0.1), members
    assert any(m["best"] is not None for m in members), members
    completed = [m for m in members if m["status"] == "Completed"]
    assert completed, members
    best, score = value(p.stdout, "BEST").split()
    assert best == doc["best_run_id"] and float(score) == doc["best_value"] == max(
        m["best"] for m in members if m["best"] is not None), (p.stdout[-500:], members)
    # the trials' output, streamed (a random sweep of 4 may draw no "good" trial: the line of one that ran)
    assert any(f"trial {m['params']['job.params.quality']} " in p.stdout for m in completed), p.stdout[-2000:]
    return doc


def check_pipeline(home: Path, project: Path) -> dict:
    p = run_script(project, "pipeline_job.py")
    assert p.returncode == 0, p.stdout + p.stderr
    name = value(p.stdout, "NAME").split()[0]
    assert value(p.stdout, "FINAL") == "Completed"
    steps = {r["id"].rsplit(".", 1)[1]: r for r in runs(home) if r["id"].startswith(name + ".")}
    assert set(steps) == {"a", "b", "c"} and all(s["status"] == "Completed" for s in steps.values())
    assert value(p.stdout, "STEPS") == str(sorted(f"{name}.{s}" for s in "abc"))
    assert (project / "downloaded" / "named-outputs" / "final" / "data.txt").read_text() == "ABC" * 8 + "\n"
    return steps


def test_distributed_pytorch_command_runs_unmodified(home, project):
    sdk_project(project)
    check_ddp(home, project)


@pytest.mark.tracking  # the trials' mlflow.log_metric reach the sweep through the MLflow mirror
def test_sweep_with_choice_uniform_and_median_stopping(tmp_path, monkeypatch, project):
    home = tmp_path / "ml home (1), a=b"  # a folder Hydra's override grammar cannot hold unquoted
    home.mkdir()
    monkeypatch.setenv("MLTRAIN_HOME", str(home))
    sdk_project(project)
    check_sweep(home, project)


def test_pipeline_of_three_yaml_components_with_a_pipeline_output(home, project):
    sdk_project(project)
    check_pipeline(home, project)


def test_without_the_variable_azure_ai_ml_is_azures_own(home, project):
    probe = "from azure.ai.ml import MLClient; print(MLClient.__module__)"
    write(project, "probe.py", probe)
    plain = run_script(project, "probe.py", select=False, timeout=120)
    chosen = run_script(project, "probe.py", timeout=120)
    assert plain.stdout.strip() == "azure.ai.ml._ml_client", plain.stdout + plain.stderr
    assert chosen.stdout.strip() == "mltrain.azureml.sdk_v2.client", chosen.stdout + chosen.stderr
    # selected, without the SDK (site-packages taken off the path after start): one line saying what to install
    write(project, "missing.py", "import sys\nsys.path[:] = [p for p in sys.path if 'site-packages' not in p]\n" + probe)
    missing = run_script(project, "missing.py", timeout=120)
    assert missing.returncode != 0 and missing.stderr.strip().splitlines()[-1] == (
        "ModuleNotFoundError: azure-ai-ml is not installed: pip install 'mltrain[azure]' (azure-ai-ml and azure-identity)"), missing.stderr


REFUSALS = """\
from azure.ai.ml import MLClient, command
from azure.ai.ml.exceptions import ValidationException
from azure.core.exceptions import ResourceNotFoundError
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "s", "rg", "ws")
try:
    ml_client.jobs.create_or_update(command(command="echo hi", compute="no-such-cluster"))
except ValidationException as exc:
    print("REFUSED", str(exc).replace("\\n", " | "))
try:
    ml_client.compute.get("no-such-cluster")
except ResourceNotFoundError as exc:
    print("NOTFOUND", exc.message)
print("COMPUTES", sorted(c.name for c in ml_client.compute.list()))
cluster = ml_client.compute.get("cpu-cluster")
print("CLUSTER", cluster.provisioning_state, cluster.max_instances, cluster.location, cluster.created_on[:4], "|", cluster.size)
job = ml_client.jobs.create_or_update(command(command="python -c 'import sys; print(\\"bye\\"); sys.exit(3)'"))
try:
    ml_client.jobs.stream(job.name)
except Exception as exc:
    print("RAISED", type(exc).__name__, "exited with code 3" in str(exc))
"""


def test_refusals_and_a_failed_job_raise_azures_exception_types(home, project):
    sdk_project(project)
    write(project, "refusals.py", REFUSALS)
    p = run_script(project, "refusals.py")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "compute 'no-such-cluster' is not mapped here (known: cpu-cluster, gpu-cluster)" in value(p.stdout, "REFUSED")
    assert " | " not in value(p.stdout, "REFUSED")  # one line
    assert ".mltrain/compute/no-such-cluster.yaml" in value(p.stdout, "NOTFOUND")
    assert value(p.stdout, "COMPUTES") == "['cpu-cluster', 'gpu-cluster']"
    # the fields Azure's notebooks print (`... is created, the compute size is {cluster.size}`)
    state, size = value(p.stdout, "CLUSTER").split(" | ")
    assert state.split()[:3] == ["Succeeded", "1", "local"] and state.split()[3].isdigit()
    assert size == "local: max_concurrent_jobs=2"  # the kind the mapping extends and what it sets
    assert value(p.stdout, "RAISED") == "JobException True" and "bye" in p.stdout
    assert [r["status"] for r in runs(home)] == ["Failed"]  # the refused job made no run
    assert len(list((home / "azureml_sdk").iterdir())) == 1  # and left no job file


AUTOML = """\
from azure.ai.ml import MLClient, Input, Output, automl, dsl
from azure.ai.ml.constants import AssetTypes
from azure.ai.ml.exceptions import ValidationException
from azure.identity import DefaultAzureCredential

ml_client = MLClient(DefaultAzureCredential(), "s", "rg", "ws")
# Azure's automl-forecasting-distributed-tcn notebook's job: azure-ai-ml cannot dump it without Azure
job = automl.forecasting(compute="cpu-cluster", training_data=Input(type="uri_folder", path="./data/train"),
                         validation_data=Input(type="uri_folder", path="./data/valid"), target_column_name="y",
                         primary_metric="normalized_root_mean_squared_error", enable_model_explainability=True,
                         outputs={"best_model": Output(type=AssetTypes.CUSTOM_MODEL)})
job.set_forecast_settings(forecast_horizon=24, time_column_name="t", time_series_id_column_names=["id"])
job.set_training(enable_dnn_training=True, training_mode="distributed", allowed_training_algorithms=["TCNForecaster"])


@dsl.pipeline(compute="cpu-cluster")
def pipe(train):
    node = automl.classification(training_data=train, target_column_name="y", primary_metric="accuracy")
    node.set_limits(max_trials=1)


for entity in (job, pipe(train=Input(type="mltable", path="./data/train"))):
    try:
        ml_client.jobs.create_or_update(entity)
    except ValidationException as exc:
        print("REFUSED", str(exc).replace("\\n", " | "))
"""


def test_automl_jobs_of_every_shape_are_refused_in_one_line_before_anything_is_written(home, project):
    sdk_project(project)
    write(project, "automl_jobs.py", AUTOML)
    p = run_script(project, "automl_jobs.py")
    assert p.returncode == 0, p.stdout + p.stderr
    refused = [line.split(" ", 1)[1] for line in p.stdout.splitlines() if line.startswith("REFUSED ")]
    assert refused[0].startswith("ForecastingJob: 'automl' jobs run only in Azure ML: AutoML jobs search models")
    assert refused[1].startswith("PipelineJob.jobs.node: 'automl' jobs run only in Azure ML")
    assert all(" | " not in line for line in refused) and len(refused) == 2
    assert runs(home) == [] and not list((home / "azureml_sdk").glob("*"))  # nothing queued, nothing written


MLDESIGNER_COMPONENTS = """\
from pathlib import Path

from mldesigner import Input, Output, command_component


@command_component(display_name="Prep")
def prep(raw: Input(type="uri_folder"), out: Output(type="uri_folder"), factor: int = 2):
    text = (Path(raw) / "data.txt").read_text()
    (Path(out) / "data.txt").write_text(text * factor)
    print("prep wrote", len(text) * factor)


@command_component()
def count(data: Input(type="uri_folder")):
    print("count", len((Path(data) / "data.txt").read_text()))
"""

MLDESIGNER_PIPELINE = """\
from azure.ai.ml import Input, MLClient, dsl
from azure.identity import DefaultAzureCredential
from src.components import count, prep

ml_client = MLClient(DefaultAzureCredential(), "s", "rg", "ws")


@dsl.pipeline(compute="cpu-cluster")
def pipe(raw):
    made = prep(raw=raw, factor=3)
    count(data=made.outputs.out)


job = ml_client.jobs.create_or_update(pipe(raw=Input(type="uri_folder", path="./pipe/raw")))
ml_client.jobs.stream(job.name)
print("STATUS", ml_client.jobs.get(job.name).status)
"""


def test_mldesigner_command_components_run_as_a_pipeline(home, project):
    """mldesigner's @command_component (Azure's pipeline notebooks 1b, 2a, 2e build components so): each step
    runs `mldesigner execute` in Azure's default environment for them, AzureML-mldesigner-minimal."""
    pytest.importorskip("mldesigner")
    sdk_project(project)
    write(project, "src/components.py", MLDESIGNER_COMPONENTS)
    write(project, "src/__init__.py", "")
    write(project, "mld.py", MLDESIGNER_PIPELINE)
    p = run_script(project, "mld.py", timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert value(p.stdout, "STATUS") == "Completed"
    logs = {r["id"].rsplit(".", 1)[-1]: (Path(r["dir"]) / "logs" / "rank_0.log").read_text() for r in runs(home)
            if "." in r["id"]}
    assert "prep wrote 12" in logs["made"] and "count 12" in logs["count"], logs
    assert "building environment AzureML-mldesigner-minimal" in p.stdout + p.stderr


SELF_SUBMITTING = """\
from azure.ai.ml import MLClient, dsl
from azure.identity import DefaultAzureCredential
from mldesigner import command_component


@command_component(display_name="Train")
def train(epochs: int = 1):
    print("trained", epochs)


@dsl.pipeline(compute="cpu-cluster")
def pipe():
    train(epochs=2)


ml_client = MLClient(DefaultAzureCredential(), "s", "rg", "ws")
job = ml_client.jobs.create_or_update(pipe())
ml_client.jobs.stream(job.name)
"""


def processes_of(home: Path) -> list:
    """The processes whose environment names this test's MLTRAIN_HOME: everything its jobs started."""
    import psutil

    want, out = str(home), []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("MLTRAIN_HOME") == want:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


def test_a_file_whose_steps_submit_it_again_is_refused_in_its_first_step(home, project):
    """Issue 63: an mldesigner component and the @dsl.pipeline using it in one file, submitted at module level
    without `if __name__ == "__main__":`. Each step imports the file, so each step submitted the pipeline again
    (214 processes within four minutes). The step's submission is refused in one line naming the file; that
    step fails, the pipeline ends Failed, and nothing is left running."""
    pytest.importorskip("mldesigner")
    import psutil  # noqa: F401 - processes_of

    sdk_project(project)
    write(project, "pipe.py", SELF_SUBMITTING)
    env = {**{k: v for k, v in os.environ.items() if k != "MLTRAIN_AZUREML"}, "MLTRAIN_AZUREML": "1"}
    started = time.monotonic()
    user = subprocess.Popen([sys.executable, "pipe.py"], cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    most = 0
    try:
        while user.poll() is None and time.monotonic() - started < 60:
            most = max(most, len(processes_of(home)))
            time.sleep(0.3)
    finally:
        if user.poll() is None:  # the recursion: everything it started, until nothing starts any more
            user.kill()
            while left := processes_of(home):
                for proc in left:
                    proc.kill()
                time.sleep(0.5)
    out, err = user.communicate(timeout=10)
    took = time.monotonic() - started
    assert took < 60, f"still running after {took:.0f}s, {most} processes at most"
    assert user.returncode != 0, out + err
    pipeline = [r for r in runs(home) if "." not in r["id"]]
    assert [r["status"] for r in pipeline] == ["Failed"], (pipeline, out + err)  # one pipeline, never a second
    (step,) = [r for r in runs(home) if "." in r["id"]]
    log = (Path(step["dir"]) / "logs" / "rank_0.log").read_text()
    line = (f"mltrain: refused: pipe.py submits a job from inside run {pipeline[0]['id']}'s step 'train', a job "
            "pipe.py submitted itself (a job submitted by a job's own code, nested 2 deep); guard the submission "
            'with if __name__ == "__main__":')
    assert line in log.splitlines(), log
    assert "Traceback" not in log, log
    assert step["status"] == "Failed" and "trained" not in log
    assert most <= 12, f"{most} processes at once"
    until(lambda: not processes_of(home), 10, "no process of the pipeline left")
    assert len(list((home / "azureml_sdk").iterdir())) == 1  # the step's refused submission left nothing behind


RECURSE = """\
import os, subprocess, sys

level = int(sys.argv[1])
print("level", level, "depth", os.environ["MLTRAIN_SUBMIT_DEPTH"], flush=True)
argv = [os.environ["MLTRAIN_PYTHON"], "-m", "mltrain", "job=script", "job.script=recurse.py",
        f"job.arguments=[{level + 1}]", "run.console=none"]
sys.exit(subprocess.run(argv).returncode)
"""


def test_jobs_submitted_by_jobs_nest_three_deep_and_no_deeper(home, project):
    """Issue 63: a job's code may submit a job (a pipeline's sweep step does), and that job's code one more; a
    fourth level is refused in one line, so a submission that repeats itself through the `mltrain` command (no
    file of the user's to recognise) still ends."""
    write(project, "recurse.py", RECURSE)
    p = subprocess.run(mltrain_exe() + ["job=script", "job.script=recurse.py", "job.arguments=[1]", "run.console=none"],
                       cwd=project, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0, p.stdout + p.stderr
    made = runs(home)
    assert len(made) == 3 and all(r["status"] == "Failed" for r in made), made
    logs = [(Path(r["dir"]) / "logs" / "rank_0.log").read_text() for r in made]
    assert [log.splitlines()[0] for log in logs] == ["level 1 depth 1", "level 2 depth 2", "level 3 depth 3"], logs
    line = (f"mltrain: error: `mltrain job=script job.script=recurse.py job.arguments=[4] run.console=none` submits a "
            f"job from inside run {made[2]['id']} (a job submitted by a job's own code, nested 4 deep; at most 3 are)")
    assert line in logs[2].splitlines(), logs[2]


def test_a_notebooks_code_cells_run_in_order_with_the_runner(home, project):
    """`python -m mltrain.azureml.sdk_v2.run_notebook NOTEBOOK.ipynb` selects mltrain itself (no variable)."""
    sdk_project(project)
    cells = ["%pip install azure-ai-ml\nfrom azure.ai.ml import MLClient, command",
             "ml_client = MLClient.from_config(credential=None)",
             "job = ml_client.jobs.create_or_update(command(command='echo hello from a notebook'))\n"
             "ml_client.jobs.stream(job.name)",
             "display(ml_client.jobs.get(job.name).status)"]  # Jupyter's display, IPython or not
    book = {"cells": [{"cell_type": "markdown", "source": ["# title"]}]
            + [{"cell_type": "code", "source": c.splitlines(True), "outputs": []} for c in cells],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    write(project, "nb.ipynb", json.dumps(book))
    env = {k: v for k, v in os.environ.items() if k != "MLTRAIN_AZUREML"}
    p = subprocess.run([sys.executable, "-m", "mltrain.azureml.sdk_v2.run_notebook", "nb.ipynb"], cwd=project,
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "hello from a notebook" in p.stdout and "Status: Completed" in p.stdout
    assert p.stdout.splitlines()[-1] == "Completed", p.stdout[-500:]


ASSETS = """\
from azure.ai.ml import Input, MLClient, command, load_component
from azure.ai.ml.constants import AssetTypes
from azure.ai.ml.entities import Data, Model
from azure.core.exceptions import ResourceNotFoundError

ml_client = MLClient.from_config(credential=None)
data = ml_client.data.create_or_update(Data(path="./pipe/raw", type=AssetTypes.URI_FOLDER, name="raw-text"))
print("DATA", data.name, data.version, str(ml_client.data.get("raw-text", label="latest").path).endswith("pipe/raw"))
job = command(command="cat ${{inputs.raw}}/data.txt", inputs={"raw": Input(type="uri_folder", path="azureml:raw-text@latest")})
job = ml_client.jobs.create_or_update(job)
ml_client.jobs.stream(job.name)

first = ml_client.models.create_or_update(Model(path="./pipe/src", type=AssetTypes.CUSTOM_MODEL, name="tiny"))
second = ml_client.models.create_or_update(Model(path="./pipe/src", type=AssetTypes.CUSTOM_MODEL, name="tiny"))
print("MODELS", first.version, second.version, ml_client.models.get("tiny", version="1").name,
      sorted(m.name for m in ml_client.models.list()))
ml_client.models.download("tiny", version="2", download_path="./model-copy")
# a job's MLflow artifact as a model (Azure's HyperDrive notebooks: the best trial's log_model)
logged = ml_client.jobs.create_or_update(command(
    command="python -c 'import mlflow; mlflow.log_text(\\"weights\\", \\"clf/MLmodel\\")'"))
ml_client.jobs.stream(logged.name)
from_job = ml_client.models.create_or_update(Model(
    path=f"azureml://jobs/{logged.name}/outputs/artifacts/paths/clf/", type=AssetTypes.CUSTOM_MODEL, name="from-job"))
ml_client.models.download("from-job", version=from_job.version, download_path="./job-model")

prep = ml_client.components.create_or_update(load_component(source="./pipe/prep.yml"))
print("COMPONENT", prep.name, ml_client.components.get("prep").command.split()[1])
print("ENVIRONMENT", ml_client.environments.get("AzureML-sklearn-1.5").name)
try:
    ml_client.environments.get("no-such-env")
except ResourceNotFoundError:
    print("ENVIRONMENT missing")

slow = ml_client.jobs.create_or_update(command(command="python -c 'import time; time.sleep(120)'"))
ml_client.jobs.begin_cancel(slow.name).result()
print("CANCELED", ml_client.jobs.get(slow.name).status)
"""


@pytest.mark.tracking  # a job's mlflow.log_text is one of its artifacts only where runs are tracked
def test_assets_and_cancel(home, project):
    sdk_project(project)
    write(project, "assets.py", ASSETS)
    p = run_script(project, "assets.py")
    assert p.returncode == 0, p.stdout + p.stderr
    assert value(p.stdout, "DATA") == "raw-text 1 True" and "abc" in p.stdout  # the job read the data asset
    assert value(p.stdout, "MODELS") == "1 2 tiny ['tiny']"
    assert (project / "model-copy" / "tiny" / "step.py").is_file()
    assert (project / "job-model" / "from-job" / "MLmodel").read_text() == "weights"
    assert value(p.stdout, "COMPONENT") == "prep step.py"
    assert (project / ".mltrain" / "components" / "prep.yml").is_file()
    assert value(p.stdout, "ENVIRONMENT") == "AzureML-sklearn-1.5" and "ENVIRONMENT missing" in p.stdout
    assert value(p.stdout, "CANCELED") == "Canceled"


def test_notebook_magics_workspaces_registries_and_an_unsubmitted_job(home, project):
    """What Azure's notebooks do around their jobs: `%%writefile {var}/FILE` writes the file (its body is not
    run), `%%capture` runs its body, `ml_client.workspaces.get(...).id` splits into the subscription, a
    registry client's calls and `jobs.stream(None)` (after a refused create_or_update) are one line each."""
    sdk_project(project)
    cells = ["import os\nsrc_dir = './made'\nos.makedirs(src_dir, exist_ok=True)",
             "%%writefile {src_dir}/hello.py\nimport sys\nprint('written file ran', sys.argv[1])\nraise SystemExit(0)",
             "%%capture\n! pip install nothing\ncaptured = 'yes'",
             "from azure.ai.ml import MLClient, command\nfrom azure.ai.ml.exceptions import ValidationException\n"
             "ml_client = MLClient(None, 'sub-1', 'rg-1', 'ws-1')\n"
             "print('WORKSPACE', ml_client.workspaces.get('ws-1').id.split('/')[2],\n"
             "      ml_client._workspaces.get(ml_client.workspace_name).name, captured)",
             "registry = MLClient(None, registry_name='azureml')\ntry:\n"
             "    registry.components.get(name='some_pipeline', label='latest')\n"
             "except ValidationException as exc:\n    print('REGISTRY', str(exc).replace(chr(10), ' | '))",
             "job = command(command='echo hi', compute='no-such-cluster')\ntry:\n"
             "    job = ml_client.jobs.create_or_update(job)\nexcept ValidationException:\n    pass\ntry:\n"
             "    ml_client.jobs.stream(job.name)\nexcept ValidationException as exc:\n"
             "    print('UNSUBMITTED', str(exc).replace(chr(10), ' | '))",
             "job = ml_client.jobs.create_or_update(command(code=src_dir, command='python hello.py arg'))\n"
             "ml_client.jobs.stream(job.name)"]
    book = {"cells": [{"cell_type": "code", "source": c.splitlines(True), "outputs": []} for c in cells],
            "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    write(project, "magics.ipynb", json.dumps(book))
    env = {k: v for k, v in os.environ.items() if k != "MLTRAIN_AZUREML"}
    p = subprocess.run([sys.executable, "-m", "mltrain.azureml.sdk_v2.run_notebook", "magics.ipynb"], cwd=project,
                       capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (project / "made" / "hello.py").read_text().startswith("import sys\nprint(")
    assert "Writing ./made/hello.py" in p.stdout
    assert value(p.stdout, "WORKSPACE") == "sub-1 ws-1 yes"
    assert value(p.stdout, "REGISTRY") == (
        "MLClient(registry_name='azureml').components.get(name='some_pipeline', label='latest'): Azure ML "
        "registries are Azure's service, not available in mltrain; register the asset in this workspace "
        "(ml_client.components.create_or_update, .mltrain/)")
    assert value(p.stdout, "UNSUBMITTED") == ("jobs.stream(None): a job name is needed; this job was never "
                                              "submitted (its create_or_update failed or was not run)")
    assert "written file ran arg" in p.stdout and "Status: Completed" in p.stdout


NESTED = """\
from azure.ai.ml import Input, MLClient, dsl, load_component

ml_client = MLClient.from_config(credential=None)
prep = load_component(source="./pipe/prep.yml")
train = load_component(source="./pipe/train.yml")
score = load_component(source="./pipe/score.yml")


@dsl.pipeline()
def inner(data, factor=3, where="cpu-cluster"):
    a = prep(source=data, factor=factor)
    a.compute = where
    b = train(source=a.outputs.result, mode="lower")
    return {"out": b.outputs.result}


@dsl.pipeline()
def middle(data: Input, where: str):
    return {"out": inner(data=data, factor=1, where=where).outputs.out}


registered = ml_client.components.create_or_update(middle)
print("REGISTERED", type(registered).__name__, ml_client.components.get(registered.name) is registered)


@dsl.pipeline(default_compute="cpu-cluster")
def outer(raw, where):
    x = inner(data=raw)
    y = registered(data=x.outputs.out, where=where)
    z = score(source=y.outputs.out, factor=1)
    return {"final": z.outputs.result, "first": x.outputs.out}


job = outer(raw=Input(type="uri_folder", path="./pipe/raw"), where="gpu-cluster")
returned = ml_client.jobs.create_or_update(job)
ml_client.jobs.stream(returned.name)
print("NAME", returned.name)
print("FINAL", ml_client.jobs.get(returned.name).status)
ml_client.jobs.download(returned.name, output_name="final", download_path="./got")
ml_client.jobs.download(returned.name, output_name="first", download_path="./got")
"""


def test_nested_pipeline_components_run_as_their_steps(home, project):
    """A `@dsl.pipeline` function called inside another (two levels deep, one of them registered with
    components.create_or_update): its steps run as steps of the outer pipeline, given the outer node's
    inputs (or the nested pipeline's defaults; a step's compute too), and what they make feeds the outer
    steps and the outer pipeline's outputs."""
    sdk_project(project)
    write(project, "nested.py", NESTED)
    p = run_script(project, "nested.py", timeout=400)
    assert p.returncode == 0, p.stdout + p.stderr
    name = value(p.stdout, "NAME")
    assert value(p.stdout, "FINAL") == "Completed"
    assert value(p.stdout, "REGISTERED") == "PipelineComponent True"  # components.create_or_update(dsl function)
    steps = {r["id"].rsplit(".", 1)[1]: r["status"] for r in runs(home) if r["id"].startswith(name + ".")}
    assert steps == dict.fromkeys(["x_a", "x_b", "y_inner_a", "y_inner_b", "z"], "Completed"), steps
    # x: ABC x3 (inner's default), lower x2; y: upper x1 (middle gives 1), lower x2; z: upper x1
    assert (project / "got" / "named-outputs" / "first" / "data.txt").read_text() == "abc" * 6 + "\n"
    assert (project / "got" / "named-outputs" / "final" / "data.txt").read_text() == ("ABC" * 12)[:40] + "\n"
