"""Azure ML v2 job files run by `mltrain job create --file`, with real processes: a command job with
inputs and outputs, 2-rank pytorch and mpi jobs, a sweep whose trials log through MLflow and whose poor
trials a bandit policy cancels, a pipeline of three component files whose second run reuses every step,
and the refusals, each one line with nothing created. The YAML files are written here, in Azure's schemas."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import leftovers, mltrain_exe, only_run, run_mltrain, runs, until

pytestmark = pytest.mark.slow


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def create(project: Path, file: str, *extra: str, timeout: float = 180):
    return run_mltrain("job", "create", "--file", file, *extra, cwd=project, timeout=timeout)


SHOW = """\
import os, sys
print("cwd", os.path.basename(os.getcwd()))
print("python", sys.executable)
print("args", sys.argv[1:])
print("input env", os.environ["AZURE_ML_INPUT_data"])
print("mlflow", os.environ.get("MLFLOW_RUN_ID") is not None)
out = sys.argv[sys.argv.index("--out") + 1]
with open(os.path.join(out, "result.txt"), "w") as f:
    f.write(open(os.path.join(sys.argv[sys.argv.index("--data") + 1], "rows.csv")).read().upper())
"""


@pytest.mark.tracking
def test_command_job_with_inputs_and_outputs(home, project):
    write(project, "src/show.py", SHOW)
    write(project, "data/rows.csv", "a,b\n")
    write(project, "job.yml", """\
        $schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
        command: >-
          python show.py --data ${{inputs.data}} --lr ${{inputs.lr}} $[[--seed ${{inputs.seed}}]]
          --out ${{outputs.model}}
        code: src
        inputs:
          data:
            type: uri_folder
            path: ./data
            mode: ro_mount
          lr: 0.1
        outputs:
          model:
            type: custom_model
        environment_variables:
          GREETING: hi
        experiment_name: v2-tests
        display_name: show me
        tags: {team: ml}
        identity:
          type: managed
        """)
    r = create(project, "job.yml", "--set", "inputs.lr=0.2")
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert "cwd snapshot" in log                                  # the job runs in the snapshot of `code`
    assert f"python {os.path.normpath(sys.executable)}" in log  # the environment's python
    assert "'--lr', '0.2'" in log and "--seed" not in log         # --set, and the optional block dropped
    assert f"input env {project / 'data'}" in log and "mlflow True" in log
    assert (Path(run["dir"]) / "outputs" / "model" / "result.txt").read_text() == "A,B\n"
    assert (r.out + r.err).count("identity: Azure-only") == 1     # said once
    config = json.loads((Path(run["dir"]) / "job.json").read_text())["config"]
    assert config["azureml"]["display_name"] == "show me" and config["azureml"]["tags"] == {"team": "ml"}
    assert config["experiment_name"] == "v2-tests"


def test_named_job_and_explicit_output_path(home, project, tmp_path):
    write(project, "job.yml", """\
        command: echo done > ${{outputs.report}}
        outputs:
          report:
            type: uri_file
            path: ./reports/report.txt
        """)
    r = create(project, "job.yml", "--name", "my-job-1", "--experiment-name", "named")
    assert r.rc == 0, r.out + r.err
    assert only_run(home)["id"] == "my-job-1"
    assert (project / "reports" / "report.txt").read_text() == "done\n"


def test_two_rank_pytorch_job(home, project):
    write(project, "ddp.yml", """\
        command: >-
          python allreduce.py --dist-url $AZ_BATCHAI_PYTORCH_INIT_METHOD --rank $RANK --world-size $WORLD_SIZE
        code: .
        distribution:
          type: pytorch
          process_count_per_instance: 2
        """)
    r = create(project, "ddp.yml")
    assert r.rc == 0, r.out + r.err
    logs = Path(only_run(home)["dir"]) / "logs"
    for rank in (0, 1):
        assert f"allreduce rank={rank} world=2 sum=3" in (logs / f"rank_{rank}.log").read_text()


def test_two_rank_mpi_job(home, project):
    from mpi_support import require_mpi

    require_mpi()
    write(project, "mpi.yml", """\
        command: python mpi_allreduce.py
        code: .
        distribution:
          type: mpi
          process_count_per_instance: 2
        """)
    r = create(project, "mpi.yml")
    assert r.rc == 0, r.out + r.err
    log = (Path(only_run(home)["dir"]) / "logs" / "rank_1.log").read_text()
    assert "mpi rank=1 size=2 sum=3" in log


TRIAL = """\
import argparse, time, mlflow
p = argparse.ArgumentParser(); p.add_argument("--quality"); p.add_argument("--lr", type=float)
a = p.parse_args()
for step in range(4):
    mlflow.log_metric("accuracy", (0.9 if a.quality == "good" else 0.1) * (step + 1) / 4, step=step)
    time.sleep(0.5)
"""


@pytest.mark.tracking
def test_sweep_with_bandit_follows_mlflow_and_cancels_poor_trials(home, project):
    write(project, "src/trial.py", TRIAL)
    write(project, "sweep.yml", """\
        $schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
        type: sweep
        trial:
          code: src
          command: python trial.py --quality ${{search_space.quality}} --lr ${{search_space.lr}}
        sampling_algorithm:
          type: random
          seed: 3
        search_space:
          quality:
            type: choice
            values: [good, bad]
          lr:
            type: loguniform
            min_value: -6
            max_value: -1
        objective:
          goal: maximize
          primary_metric: accuracy
        early_termination:
          type: bandit
          slack_factor: 0.1
          evaluation_interval: 1
        limits:
          max_total_trials: 4
          max_concurrent_trials: 4
        """)
    r = create(project, "sweep.yml", timeout=240)
    assert r.rc == 0, r.out + r.err
    doc = json.loads(next((home / "runs" / "_sweeps").glob("*/sweep.json")).read_text())
    members = doc["members"]
    qualities = {m["index"]: m["params"]["job.params.quality"] for m in members}
    assert set(qualities.values()) == {"good", "bad"}
    for m in members:
        lr = m["params"]["job.params.lr"]
        assert 2.4e-3 < lr < 0.37 or lr is None  # e^-6 ... e^-1: Azure's natural-log exponents
        if qualities[m["index"]] == "bad":
            assert m["status"] == "Canceled" and "bandit" in m["canceled_by"]
        else:
            assert m["status"] == "Completed" and m["best"] == pytest.approx(0.9)


COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: {name}
version: 1
inputs:
  source:
    type: uri_folder
  factor:
    type: integer
    default: 2
    min: 1
    max: 10
  mode:
    type: string
    default: upper
    enum: [upper, lower]
outputs:
  result:
    type: uri_folder
code: ./src
command: >-
  python step.py --source ${{{{inputs.source}}}} --factor ${{{{inputs.factor}}}} --mode ${{{{inputs.mode}}}}
  --result ${{{{outputs.result}}}}
"""

STEP = """\
import argparse, os
p = argparse.ArgumentParser()
for a in ("--source", "--factor", "--mode", "--result"):
    p.add_argument(a)
a = p.parse_args()
text = open(os.path.join(a.source, "data.txt")).read().strip()
text = (text.upper() if a.mode == "upper" else text.lower()) * int(a.factor)
open(os.path.join(a.result, "data.txt"), "w").write(text[:40] + "\\n")
print("wrote", text[:40])
"""

PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
display_name: three_steps
settings:
  default_compute: azureml:cpu-cluster
inputs:
  raw:
    type: uri_folder
    path: ./raw
  times: 2
outputs:
  final:
    mode: upload
jobs:
  prep:
    type: command
    component: ./prep.yml
    inputs:
      source: ${{parent.inputs.raw}}
      factor: ${{parent.inputs.times}}
  train:
    type: command
    component: ./train.yml
    inputs:
      source: ${{parent.jobs.prep.outputs.result}}
      mode: lower
  score:
    type: command
    component: ./score.yml
    inputs:
      source: ${{parent.jobs.train.outputs.result}}
    outputs:
      result: ${{parent.outputs.final}}
"""


def _pipeline_project(project: Path) -> None:
    write(project, "pipe/src/step.py", STEP)
    write(project, "pipe/raw/data.txt", "abc\n")
    for name in ("prep", "train", "score"):
        write(project, f"pipe/{name}.yml", COMPONENT.format(name=name))
    write(project, "pipe/pipeline.yml", PIPELINE)
    write(project, ".mltrain/compute/cpu-cluster.yaml", "defaults: [local_schema, _self_]\nmax_concurrent_jobs: 2\n")


def test_pipeline_of_component_files_runs_then_reuses_every_step(home, project):
    _pipeline_project(project)
    first = create(project, "pipe/pipeline.yml", timeout=240)
    assert first.rc == 0, first.out + first.err
    steps = {r["id"].rsplit(".", 1)[1]: r for r in runs(home) if "." in r["id"]}
    final = Path(steps["score"]["dir"]) / "outputs" / "result" / "data.txt"
    assert final.read_text() == "ABC" * 8 + "\n"  # prep: upper x2, train: lower x2, score: upper x2
    second = create(project, "pipe/pipeline.yml", timeout=240)
    assert second.rc == 0, second.out + second.err
    assert second.out.count("reused") >= 3, second.out


def test_component_input_checks_name_the_step_and_input(home, project):
    _pipeline_project(project)
    # (a value outside a component's `enum` is passed on, as Azure does: tests/test_azureml_v2_azure_files.py)
    bad = (project / "pipe" / "pipeline.yml").read_text().replace("      mode: lower", "      mode: lower\n"
                                                                  "      factor: 11")
    write(project, "pipe/bad.yml", bad)
    r = create(project, "pipe/bad.yml")
    assert r.rc == 2 and r.err.count("\n") == 1
    assert "bad.yml:27 jobs.train.inputs.factor: step train input factor: 11 is above its max 10" in r.err
    assert leftovers(home) == []


REFUSED = [
    ("type: automl\ntask: classification\n", "type: 'automl' jobs run only in Azure ML"),
    ("command: ls\nlimits:\n  timeot: 10\n", "limits.timeot: unknown field (did you mean timeout?)"),
    ("command: ls\ncompute: azureml:gpu-cluster\n", "compute: compute 'gpu-cluster' is not mapped here (known: cpu-cluster)"),
    ("command: cat ${{inputs.x}}\ninputs:\n  x:\n    type: uri_file\n    path: https://example.invalid/x.csv\n",
     "inputs.x.path: cannot download 'https://example.invalid/x.csv'"),
]


@pytest.mark.parametrize("text,expected", REFUSED, ids=[e[:30] for _, e in REFUSED])
def test_refusals_are_one_line_and_create_nothing(home, project, text, expected):
    write(project, ".mltrain/compute/cpu-cluster.yaml", "defaults: [local_schema, _self_]\n")
    write(project, "bad.yml", text)
    r = create(project, "bad.yml")
    assert r.rc == 2, r.out + r.err
    assert r.err.startswith("mltrain: error: bad.yml:") and expected in r.err and r.err.count("\n") == 1
    assert "Traceback" not in r.err and leftovers(home) == []


def test_dry_run_plans_and_imports_neither_torch_nor_mlflow(home, project):
    _pipeline_project(project)
    code = ("import sys\nfrom mltrain.cli import main\n"
            "sys.argv = ['mltrain', 'job', 'create', '--file', 'pipe/pipeline.yml', '--dry-run']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    pass\n"
            "print('HEAVY', sorted(m for m in ('torch', 'mlflow', 'optuna') if m in sys.modules))\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120)
    assert "HEAVY []" in p.stdout, p.stdout + p.stderr
    assert "pipeline three_steps (dry run)" in p.stdout + p.stderr
    assert leftovers(home) == []


def _wheel(folder: Path) -> str:
    """A tiny wheel, written by hand (no network, no build step)."""
    import zipfile

    name = "v2_layer_probe-0.1-py3-none-any.whl"
    info = "v2_layer_probe-0.1.dist-info"
    with zipfile.ZipFile(folder / name, "w") as whl:
        whl.writestr("v2_layer_probe.py", "WHERE = __file__\n")
        whl.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: v2-layer-probe\nVersion: 0.1\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return name


def test_pip_install_in_a_command_never_changes_a_shared_environment(home, project):
    (project / "src").mkdir(exist_ok=True)
    wheel = _wheel(project / "src")
    write(project, "pip.yml", f"""\
        command: >-
          pip install -q --no-deps --no-index {wheel} &&
          python -c "import v2_layer_probe; print('probe at', v2_layer_probe.WHERE)"
        code: src
        """)
    r = create(project, "pip.yml")
    assert r.rc == 0, r.out + r.err
    run_dir = Path(only_run(home)["dir"])
    assert f"probe at {run_dir}/pip-layer/" in (run_dir / "logs" / "rank_0.log").read_text()
    probe = subprocess.run([sys.executable, "-c", "import v2_layer_probe"], capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named" in probe.stderr  # mltrain's own environment untouched


INNER = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineComponent.schema.json
type: pipeline
name: twice
inputs:
  source:
    type: uri_folder
outputs:
  done:
    type: uri_folder
jobs:
  up:
    type: command
    component: ./prep.yml
    inputs:
      source: ${{parent.inputs.source}}
  down:
    type: command
    component: ./train.yml
    inputs:
      source: ${{parent.jobs.up.outputs.result}}
      mode: lower
    outputs:
      result: ${{parent.outputs.done}}
"""

OUTER = """\
type: pipeline
jobs:
  first:
    type: command
    component: ./prep.yml
    inputs:
      source: {type: uri_folder, path: ./raw}
  inner:
    type: pipeline
    component: ./twice.yml
    inputs:
      source: ${{parent.jobs.first.outputs.result}}
  last:
    type: command
    component: ./score.yml
    inputs:
      source: ${{parent.jobs.inner.outputs.done}}
      factor: 1
"""


def test_pipeline_component_step_expands_into_the_graph(home, project):
    _pipeline_project(project)
    write(project, "pipe/twice.yml", INNER)
    write(project, "pipe/outer.yml", OUTER)
    r = create(project, "pipe/outer.yml", timeout=240)
    assert r.rc == 0, r.out + r.err
    steps = {x["id"].rsplit(".", 1)[1]: x for x in runs(home) if "." in x["id"]}
    assert set(steps) == {"first", "inner__up", "inner__down", "last"}
    # first: ABCABC; inner up: x2 upper; inner down: x2 lower; last: x1 upper (cut at 40 characters)
    assert (Path(steps["last"]["dir"]) / "outputs" / "result" / "data.txt").read_text() == ("ABC" * 8)[:24] + "\n"


def test_designer_components_by_name_run_as_pipeline_steps(home, project):
    from train_support import write_digits

    write_digits(project / "photos", per_class=4)
    write(project, "designer.yml", """\
        type: pipeline
        jobs:
          convert:
            type: command
            component: azureml:convert_to_image_directory@latest
            inputs:
              input_dataset: {type: uri_folder, path: ./photos}
          split:
            type: command
            component: azureml://registries/azureml/components/split_image_directory/labels/latest
            inputs:
              input_image_directory: ${{parent.jobs.convert.outputs.output_image_directory}}
              fraction: 0.5
        """)
    r = create(project, "designer.yml")
    assert r.rc == 0, r.out + r.err
    steps = {x["id"].rsplit(".", 1)[1]: x for x in runs(home) if "." in x["id"]}
    halves = [Path(steps["split"]["dir"]) / "outputs" / f"image_directory_{i}" for i in (1, 2)]
    counts = [sum(1 for p in h.rglob("*.png")) for h in halves]
    assert counts[0] == counts[1] > 0  # fraction 0.5, stratified by label


def killed_once_a_run_is(home: Path, project: Path, tmp_path: Path, file: str, status: str, timeout: float) -> Path:
    """`job create --file FILE` with a TMPDIR of its own, its driver killed with SIGKILL (no atexit) once one of
    its runs is `status`, after checking it wrote no generated config files there; returns that TMPDIR. The
    driver only: its guard stops the ranks (mltrain.backends.local.guard)."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = subprocess.Popen([*mltrain_exe(), "job", "create", "--file", file], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        until(lambda: [r for r in runs(home) if r["status"] == status], timeout, f"a run {status}")
        assert not list(temp.glob("mltrain-azureml-*")), f"job create wrote {file} as config files"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    return temp


def test_a_killed_command_job_leaves_no_generated_files_and_its_run_says_driver_lost(home, project, tmp_path):
    """`job create` of a command job composes the job file's fields in memory: a driver killed with SIGKILL
    (no atexit) leaves nothing in the temporary folder, and the next look at its run settles it."""
    write(project, "job.yml", """\
        command: sleep 60
        environment: azureml://registries/azureml/environments/sklearn-1.5/labels/latest
        """)
    temp = killed_once_a_run_is(home, project, tmp_path, "job.yml", "Running", 60)
    status = run_mltrain("runs", "status", only_run(home)["id"], cwd=project)
    assert "Failed" in status.out and "driver lost" in status.out, status.out + status.err
    assert not list(temp.glob("mltrain-azureml-*"))  # (mltrain-ports: the port claims every local run shares)


SLOW_TRIAL = """\
import argparse, time, mlflow
p = argparse.ArgumentParser(); p.add_argument("--x", type=float)
a = p.parse_args()
time.sleep(2)
mlflow.log_metric("score", a.x)
"""


@pytest.mark.tracking
def test_a_v2_sweep_runs_in_process_from_memory_and_resumes_after_its_driver_is_killed(home, project, tmp_path):
    """`job create` of a sweep file runs `mltrain -m` in its own process from the file's fields held in memory:
    nothing is written to the temporary folder, the sweep's folder keeps the generated config, and after
    kill -9 of the driver `runs resume SWEEP` composes the members again from it and completes the sweep."""
    write(project, "src/trial.py", SLOW_TRIAL)
    write(project, "sweep.yml", """\
        $schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
        type: sweep
        name: slow-sweep
        trial:
          code: src
          command: python trial.py --x ${{search_space.x}}
          environment: azureml://registries/azureml/environments/sklearn-1.5/labels/latest
        sampling_algorithm: grid
        search_space:
          x:
            type: choice
            values: [1, 2, 3, 4]
        objective:
          goal: maximize
          primary_metric: score
        limits:
          max_total_trials: 4
          max_concurrent_trials: 1
        """)
    dry = create(project, "sweep.yml", "--dry-run")
    assert dry.rc == 0, dry.out + dry.err
    assert not (home / "runs" / "_sweeps").exists() or not list((home / "runs" / "_sweeps").iterdir())
    temp = killed_once_a_run_is(home, project, tmp_path, "sweep.yml", "Completed", 120)
    (sweep,) = (home / "runs" / "_sweeps").iterdir()
    kept = sweep / "generated_config" / "azureml_job" / "slow-sweep.yaml"
    assert kept.read_text().startswith("# @package _global_\n"), kept.read_text()
    assert json.loads((sweep / "config_path.json").read_text())[0] == str(sweep / "generated_config")
    resumed = run_mltrain("runs", "resume", sweep.name, cwd=project, timeout=240)
    assert resumed.rc == 0, resumed.out + resumed.err
    doc = json.loads((sweep / "sweep.json").read_text())
    assert sorted(m["params"]["job.params.x"] for m in doc["members"] if m["status"] == "Completed") == [1, 2, 3, 4]
    assert not list(temp.glob("mltrain-azureml-*"))


def test_a_dry_run_of_jobs_without_code_in_a_fresh_home_plans_them_and_leaves_nothing(home, project):
    """Azure runs a job without `code:` in an empty folder: the dry run of such a command job, and of a pipeline
    of them, plans it in a home that never ran a job, and leaves that home as it found it."""
    write(project, "hello.yml", """\
        command: echo hello
        environment: azureml://registries/azureml/environments/sklearn-1.5/labels/latest
        """)
    write(project, "two.yml", """\
        type: pipeline
        jobs:
          first: {type: command, command: echo first}
          second: {type: command, command: echo second}
        """)
    for file in ("hello.yml", "two.yml"):
        dry = create(project, file, "--dry-run")
        assert dry.rc == 0, dry.out + dry.err
        assert list(home.iterdir()) == [], list(home.rglob("*"))


def test_a_failed_v2_pipeline_says_so_once_and_exits_non_zero(home, project):
    """A pipeline whose step fails ends as `mltrain pipeline=...` ends: its summary names the failed step, the
    exit status is the run's, and no second `mltrain: error:` line repeats it."""
    write(project, "fails.yml", """\
        type: pipeline
        jobs:
          broken: {type: command, command: exit 3}
        """)
    r = create(project, "fails.yml")
    assert r.rc != 0, r.out + r.err
    assert "Failed: step broken failed" in r.out + r.err, r.out + r.err
    assert "mltrain: error:" not in r.out + r.err, r.out + r.err
