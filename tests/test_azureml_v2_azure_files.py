"""Constructs of Azure's own example job files (cli/jobs/ of Azure/azureml-examples) that Azure's loader
accepts and Azure runs, written here as small files of our own: a step's compute bound to a pipeline
input, a web file input under --dry-run, `environment: file:...`, a component input outside its `enum`,
Azure-only node types inside a pipeline. Real processes; Azure's own loader (azure-ai-ml, a test
dependency) is asked about the same files where its verdict is the point."""
from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import pytest
from support import leftovers, metric_rows, only_run, run_mltrain, runs
from test_azureml_v2 import create, write

pytestmark = pytest.mark.slow

#: A mapped compute told apart from the default local one by its queue width.
LOCAL_COMPUTE = "defaults: [local_schema, _self_]\nmax_concurrent_jobs: 3\n"


def azure_accepts(path: Path) -> None:
    """Azure's own offline loader reads the file without an error (the oracle of issue 38)."""
    ml = pytest.importorskip("azure.ai.ml")
    ml.load_job(str(path))


def step_runs(home: Path) -> dict:
    return {r["id"].rsplit(".", 1)[1]: r for r in runs(home) if "." in r["id"]}


def rank_log(run: dict) -> str:
    return (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


# ------------------------------------------------------------- 1. compute bound to a pipeline input

ECHO_COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: echo_where
inputs:
  word:
    type: string
    default: hi
outputs:
  out:
    type: uri_folder
command: echo ${{inputs.word}} > ${{outputs.out}}/word.txt
environment:
  image: python:3.11
"""

TRAIN_EVAL_COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineComponent.schema.json
type: pipeline
name: train_eval
inputs:
  train_node_compute:
    type: string
  word:
    type: string
outputs:
  said:
    type: uri_folder
jobs:
  train:
    type: command
    component: ./echo.yml
    compute: ${{parent.inputs.train_node_compute}}
    inputs:
      word: ${{parent.inputs.word}}
    outputs:
      out: ${{parent.outputs.said}}
"""

PROMOTED_COMPUTE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
inputs:
  compute_train_node: {train}
  compute_compare_node: cpu-cluster
jobs:
  inner:
    type: pipeline
    component: ./train_eval.yml
    inputs:
      train_node_compute: ${{{{parent.inputs.compute_train_node}}}}
      word: trained
  compare:
    type: command
    component: ./echo.yml
    compute: ${{{{parent.inputs.compute_compare_node}}}}
    inputs:
      word: compared
"""


def _promoted(project: Path, train: str) -> None:
    write(project, ".mltrain/compute/cpu-cluster.yaml", LOCAL_COMPUTE)
    write(project, "pipe/echo.yml", ECHO_COMPONENT)
    write(project, "pipe/train_eval.yml", TRAIN_EVAL_COMPONENT)
    write(project, "pipe/pipeline.yml", PROMOTED_COMPUTE.format(train=train))


def test_a_steps_compute_bound_to_a_pipeline_input_is_that_inputs_compute(home, project):
    _promoted(project, "cpu-cluster")
    azure_accepts(project / "pipe" / "pipeline.yml")
    r = create(project, "pipe/pipeline.yml", timeout=240)
    assert r.rc == 0, r.out + r.err
    steps = step_runs(home)
    assert set(steps) == {"inner__train", "compare"}
    for name, word in (("inner__train", "trained"), ("compare", "compared")):
        run_dir = Path(steps[name]["dir"])
        assert (run_dir / "outputs" / "out" / "word.txt").read_text() == f"{word}\n"
        config = json.loads((run_dir / "job.json").read_text())["config"]
        assert config["compute"]["max_concurrent_jobs"] == 3, config["compute"]  # cpu-cluster's


def test_a_bound_compute_that_is_not_mapped_is_named_by_its_value(home, project):
    _promoted(project, "gpu-cluster")
    r = create(project, "pipe/pipeline.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert "train_eval.yml:" in r.err and "jobs.train.compute: compute 'gpu-cluster' is not mapped here" in r.err
    assert "${{" not in r.err and leftovers(home) == []


# ------------------------------------------------------------------ 2. a web file input, --dry-run


@pytest.fixture
def web(tmp_path) -> Iterator[str]:
    """A web server on 127.0.0.1 serving a folder (no other network exists here)."""
    root = tmp_path / "web"
    root.mkdir()
    (root / "Titanic.csv").write_text("name,survived\nrose,1\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


WEB_PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
inputs:
  titanic:
    type: uri_file
    path: {url}/Titanic.csv
jobs:
  count:
    type: command
    command: wc -l < ${{{{inputs.data}}}} | sed 's/^/rows /'
    inputs:
      data: ${{{{parent.inputs.titanic}}}}
"""


def test_dry_run_of_a_web_file_input_downloads_nothing_and_names_the_file_the_run_reads(home, project, web):
    """A dry run plans and changes nothing (issue 54): the file is downloaded when the job starts, into the
    very path the dry run names."""
    write(project, "web.yml", WEB_PIPELINE.format(url=web))
    dry = create(project, "web.yml", "--dry-run")
    assert dry.rc == 0, dry.out + dry.err
    assert not (home / "cache").exists() and leftovers(home) == []
    planned = dry.out.split("data<-", 1)[1].split(" ", 1)[0]
    assert f"data<-{planned} (downloaded from {web}/Titanic.csv when the job starts)" in dry.out, dry.out
    live = create(project, "web.yml")
    assert live.rc == 0, live.out + live.err
    assert "rows 2" in rank_log(step_runs(home)["count"])
    assert Path(planned).read_text() == "name,survived\nrose,1\n"
    azure_accepts(project / "web.yml")


def test_a_web_file_that_cannot_be_fetched_is_the_runs_business_not_the_dry_runs(home, project, web):
    write(project, "web.yml", WEB_PIPELINE.format(url=web).replace("Titanic.csv", "Missing.csv"))
    dry = create(project, "web.yml", "--dry-run")
    assert dry.rc == 0 and "Missing.csv when the job starts" in dry.out, dry.out + dry.err
    r = create(project, "web.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert f"inputs.titanic.path: cannot download '{web}/Missing.csv'" in r.err and leftovers(home) == []
    assert list((home / "cache" / "downloads").iterdir()) == []  # no half-made file left for a later run


MAPPED_WEB_FILE_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: wc -l < ${{inputs.diabetes_csv}}
inputs:
  diabetes_csv:
    type: uri_file
    path: https://azuremlexamples.blob.core.windows.net/datasets/diabetes.csv
environment:
  image: python:3.11
"""


def test_a_web_file_mapped_to_a_folder_that_lacks_it_is_refused_in_one_line(home, project):
    """Azure's single-step/scikit-learn/diabetes: its web file's prefix is mapped, but the copy is not there; the
    run used to start and fail in the job's own pandas.read_csv (FileNotFoundError)."""
    write(project, ".mltrain/datastores.yaml", "https://azuremlexamples.blob.core.windows.net/datasets/: data\n")
    (project / "data").mkdir(exist_ok=True)
    write(project, "job.yml", MAPPED_WEB_FILE_JOB)
    azure_accepts(project / "job.yml")
    for extra in (("--dry-run",), ()):
        r = create(project, "job.yml", *extra)
        assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
        assert "job.yml:6 inputs.diabetes_csv.path: 'https://azuremlexamples.blob.core.windows.net/datasets/" \
               "diabetes.csv' is mapped to " in r.err and "which does not exist" in r.err, r.err
        assert runs(home) == [] and leftovers(home) == []
    (project / "data" / "diabetes.csv").write_text("age,target\n1,2\n3,4\n")
    r = create(project, "job.yml")
    assert r.rc == 0, r.out + r.err
    assert rank_log(only_run(home)).strip().endswith("3")


# ------------------------------------------------------------ 3. environment: file:./env.yml

ENV_FILE = """\
$schema: https://azuremlschemas.azureedge.net/latest/environment.schema.json
name: from-a-file
version: 1
image: python:3.11
tags:
  os: ubuntu
"""


def test_environment_named_by_a_file_reference_is_read_from_that_file(home, project):
    write(project, "envs/azureml/env.yml", ENV_FILE)
    write(project, "job.yml", """\
        command: python -c "import sys; print('ran on', sys.version_info[0])"
        environment: file:./envs/azureml/env.yml
        """)
    azure_accepts(project / "job.yml")
    r = create(project, "job.yml")
    assert r.rc == 0, r.out + r.err
    assert "image python:3.11 is Docker Hub's Python" in r.out
    assert "ran on 3" in rank_log(only_run(home))


@pytest.mark.parametrize("env,expected", [
    ("name: built\nbuild:\n  path: .\n", "env.yml:2 build: a Docker build context needs a container build service"),
    ("name: typo\nimgae: python:3.11\n", "env.yml:2 imgae: unknown field (did you mean image?)"),
    (None, "job.yml:2 environment: environment file 'file:./envs/azureml/env.yml' does not exist"),
], ids=["build", "unknown-field", "missing"])
def test_an_environment_file_is_checked_where_it_is_written(home, project, env, expected):
    if env is not None:
        write(project, "envs/azureml/env.yml", env)
    write(project, "job.yml", "command: echo hi\nenvironment: file:./envs/azureml/env.yml\n")
    r = create(project, "job.yml")
    assert r.rc == 2 and r.err.count("\n") == 1 and expected in r.err, r.out + r.err
    assert leftovers(home) == []


# ------------------------------------------------------- 4. a component input outside its enum

TRANSFORM_COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: init_transform
inputs:
  resize:
    type: string
    default: True
    enum: ['True', 'False']
  center_crop:
    type: string
    default: False
    enum: ['True', 'False']
  flip:
    type: boolean
    default: false
outputs:
  out:
    type: uri_folder
command: >-
  echo resize ${{inputs.resize}} crop ${{inputs.center_crop}} flip ${{inputs.flip}} > ${{outputs.out}}/t.txt
environment:
  image: python:3.11
"""

TRANSFORM_PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
jobs:
  init:
    type: command
    component: file:./transform.yml
    inputs:
      resize: "False"
      center_crop: 224
      flip: "True"
"""


def test_a_value_outside_a_components_enum_is_passed_on_and_said_once(home, project):
    write(project, "pipe/transform.yml", TRANSFORM_COMPONENT)
    write(project, "pipe/pipeline.yml", TRANSFORM_PIPELINE)
    azure_accepts(project / "pipe" / "pipeline.yml")
    r = create(project, "pipe/pipeline.yml")
    assert r.rc == 0, r.out + r.err
    out = Path(step_runs(home)["init"]["dir"]) / "outputs" / "out" / "t.txt"
    assert out.read_text() == "resize False crop 224 flip True\n"  # as Azure writes them into the command
    said = [line for line in r.out.splitlines() if "outside the enum" in line]
    assert len(said) == 1 and "step init input center_crop: '224' is outside the enum" in said[0], r.out
    assert r.out.count("'True' is text where component init_transform declares a boolean") == 1


def test_the_designer_module_takes_center_crop_224_as_azures_module_does(tmp_path):
    """Azure's densenet pipeline runs Init Image Transformation with `--center-crop 224`: Azure's module (its
    flags read by python-fire) takes the number as true; so does mltrain's stand-in, saying so once."""
    import mltrain

    shim = Path(mltrain.__file__).parent / "_azureml_shim"
    module = "azureml.designer.modules.computer_vision.transform.init_image_transformation.init_image_transformation"
    argv = [sys.executable, "-m", module, "--resize", "False", "--center-crop", "224", "--crop-size", "16",
            "--output-path", str(tmp_path / "t")]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(shim)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((tmp_path / "t" / "image_transformation.json").read_text())["transforms"] == [["CenterCrop", 16]]
    assert p.stderr.count("--center-crop is True or False; '224' is taken as True") == 1, p.stderr



def test_the_designer_module_under_a_python_without_mltrain_runs_on_mltrains_once(tmp_path):
    """A job's command may start a `python` (here the system's) that sees the stand-ins but not mltrain: the
    module starts again on mltrain's interpreter (MLTRAIN_PYTHON); where that is the same interpreter, one line
    and exit 2, not a loop."""
    import mltrain

    system = Path("/usr/bin/python3")
    if not system.is_file() or subprocess.run([str(system), "-c", "import mltrain"], capture_output=True,
                                              cwd=tmp_path).returncode == 0:
        pytest.skip("no system Python without mltrain here")
    shim = Path(mltrain.__file__).parent / "_azureml_shim"
    module = "azureml.designer.modules.computer_vision.transform.init_image_transformation.init_image_transformation"
    argv = [str(system), "-m", module, "--resize", "--output-path", str(tmp_path / "t")]
    env = {**os.environ, "PYTHONPATH": str(shim), "MLTRAIN_PYTHON": sys.executable}
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads((tmp_path / "t" / "image_transformation.json").read_text())["transforms"] == [["Resize", 256]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60, env={**env, "MLTRAIN_PYTHON": str(system)},
                       cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: init_image_transformation: mltrain is not importable by this Python; run it with mltrain's"], p.stderr

# ------------------------------------------------- 5. a job that pip-installs its own MLflow

OWN_MLFLOW = "mlflow<2.19"


def pypi_serves(project: str, version: str) -> None:
    """Skip unless pip's index can be reached (the job's pip downloads from it; pip's cache keeps a second
    run quick): a machine without a network says so instead of failing."""
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", project], capture_output=True,
                           text=True, timeout=60)
    if found.returncode != 0 or f" {version}," not in found.stdout:
        pytest.skip(f"pip's index does not serve {project} {version} here (no network?)")


@pytest.mark.network
@pytest.mark.tracking  # the job's mlflow.log_metric reaches the run through the MLflow mirror
def test_a_job_that_pip_installs_an_older_mlflow_logs_to_its_run(home, project):
    """Azure's pipeline_with_hyperparameter_sweep trial: `pip install 'mlflow<2.19'`, then mlflow.log_metric.
    That MLflow cannot open the run's database (mltrain's newer schema; its SQL store does not import
    against the SQLAlchemy 2.1 it sees): it logs to the run's file store, which the run takes in."""
    pypi_serves("mlflow", "2.18.0")
    write(project, "src/train.py", "import mlflow\nprint('mlflow', mlflow.__version__)\nmlflow.log_metric('acc', 0.9)\n")
    write(project, "job.yml", f"""\
        $schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
        type: command
        command: pip install -q --disable-pip-version-check '{OWN_MLFLOW}' && python train.py
        code: src
        """)
    r = create(project, "job.yml", timeout=300)
    run = only_run(home)
    assert r.rc == 0 and run["status"] == "Completed", r.out + r.err + rank_log(run)[-3000:]
    assert "mlflow 2.18." in rank_log(run)  # the job's own MLflow, from its layer
    assert [(m["value"], m.get("source")) for m in metric_rows(run["dir"]) if m["name"] == "acc"] == [(0.9, "mlflow")]
    assert "acc: 0.9" in run_mltrain("runs", "show", run["id"], cwd=project).out


# --------------------------------------------- 6. Azure-only node types inside a pipeline

AZURE_ONLY_NODES = [
    ("automl", "    task: classification\n    primary_metric: accuracy\n"),
    ("spark", "    entry:\n      file: main.py\n    conf: {}\n"),
    ("data_transfer", "    task: copy_data\n"),
    ("import", "    source:\n      type: database\n"),
]


def test_a_parallel_node_missing_its_entry_script_gets_its_own_line(home, project):
    # parallel nodes run here (issue 52): an incomplete one is refused for what it lacks, at its line
    write(project, "pipe.yml", "type: pipeline\njobs:\n  first:\n    command: echo hi\n  node:\n"
                               "    type: parallel\n    mini_batch_size: 10kb\n    task:\n      type: run_function\n")
    r = create(project, "pipe.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert "pipe.yml:8 jobs.node.task.entry_script: expected a non-empty string, got None" in r.err
    assert leftovers(home) == []


@pytest.mark.parametrize("kind,fields", AZURE_ONLY_NODES, ids=[k for k, _ in AZURE_ONLY_NODES])
def test_an_azure_only_node_in_a_pipeline_gets_the_top_level_line(home, project, kind, fields):
    write(project, "pipe.yml", f"type: pipeline\njobs:\n  first:\n    command: echo hi\n  node:\n"
                               f"    type: {kind}\n{fields}")
    r = create(project, "pipe.yml")
    assert r.rc == 2 and r.err.count("\n") == 1, r.out + r.err
    assert f"pipe.yml:6 jobs.node.type: '{kind}' jobs run only in Azure ML" in r.err
    assert "unknown field" not in r.err and leftovers(home) == []
