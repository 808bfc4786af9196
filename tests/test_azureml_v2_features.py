"""Azure ML v2 job files using a tensorflow distribution (TF_CONFIG in every worker), a pipeline's
settings.continue_on_step_failure, and sweep steps in pipelines, run with real processes. The YAML files
are written here, in Azure's schemas."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import mltrain_exe, only_run, run_mltrain, runs, until
from test_azureml_v2 import write

pytestmark = pytest.mark.slow

SHOW_TF_CONFIG = """\
import json, os
print("TF_CONFIG " + json.dumps(json.loads(os.environ["TF_CONFIG"])))
"""

TENSORFLOW_JOB = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandJob.schema.json
command: python show_tf.py
code: .
{compute}distribution:
  type: tensorflow
  worker_count: 2
"""


def tf_configs(run_dir: Path) -> list:
    """Each rank's TF_CONFIG, as it printed it."""
    out = []
    for rank in (0, 1):
        log = (run_dir / "logs" / f"rank_{rank}.log").read_text()
        line = next(x for x in log.splitlines() if x.startswith("TF_CONFIG "))
        out.append(json.loads(line[len("TF_CONFIG "):]))
    return out


def check_tf_configs(configs: list) -> None:
    first, second = configs
    workers = first["cluster"]["worker"]
    assert len(workers) == 2 and second["cluster"] == {"worker": workers}, configs
    assert [c["task"] for c in configs] == [{"type": "worker", "index": 0}, {"type": "worker", "index": 1}]
    assert all(c["environment"] == "cloud" for c in configs)
    assert len(set(workers)) == 2 and all(int(w.rsplit(":", 1)[1]) > 0 for w in workers), workers


def test_tensorflow_job_gives_every_worker_tf_config(home, project):
    write(project, "show_tf.py", SHOW_TF_CONFIG)
    write(project, "tf.yml", TENSORFLOW_JOB.format(compute=""))
    r = run_mltrain("job", "create", "--file", "tf.yml", cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    configs = tf_configs(Path(run["dir"]))
    check_tf_configs(configs)
    assert len({w.rsplit(":", 1)[1] for w in configs[0]["cluster"]["worker"]}) == 2  # one host: distinct ports



#: Two independent branches: `breaks` fails at once while `slow` sleeps 3 s; each has a step after it.
BRANCHES = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
{settings}jobs:
  breaks:
    type: command
    command: python -c "import sys; sys.exit(3)"
    outputs:
      out:
        type: uri_folder
  slow:
    type: command
    command: python -c "import time; time.sleep({sleep})"
    outputs:
      out:
        type: uri_folder
  after_breaks:
    type: command
    command: echo never
    inputs:
      x: ${{{{parent.jobs.breaks.outputs.out}}}}
  after_slow:
    type: command
    command: echo after
    inputs:
      x: ${{{{parent.jobs.slow.outputs.out}}}}
"""


def _branches(home: Path, project: Path, settings: str, *extra: str, sleep: float = 3):
    write(project, "branches.yml", BRANCHES.format(settings=settings, sleep=sleep))
    r = run_mltrain("job", "create", "--file", "branches.yml", *extra, cwd=project, timeout=180)
    found = runs(home)
    steps = {x["id"].rsplit(".", 1)[1]: x for x in found if "." in x["id"]}
    return r, steps, next(x for x in found if "." not in x["id"])


@pytest.mark.parametrize("settings", ["", "settings:\n  continue_on_step_failure: false\n"], ids=["unset", "false"])
def test_a_failed_step_stops_the_pipeline_unless_told_to_continue(home, project, settings):
    r, steps, pipeline = _branches(home, project, settings)
    assert r.rc != 0 and "step breaks failed and continue_on_step_failure is false" in r.out + r.err, r.out + r.err
    status = {n: s["status"] for n, s in steps.items()}
    assert status == {"breaks": "Failed", "slow": "Canceled", "after_slow": "Canceled", "after_breaks": "Canceled"}
    for name in ("slow", "after_slow"):  # canceled naming the failed step: slow while it ran, after_slow unstarted
        assert "step breaks failed" in steps[name]["error"], steps[name]
    slow = steps["slow"]["phases"]
    assert slow["Canceled"] - slow["Running"] < 2.5, slow  # stopped, not left to sleep its 3 s
    assert pipeline["status"] == "Failed" and pipeline["error"] == "step breaks failed"


def test_continue_on_step_failure_lets_independent_branches_finish(home, project):
    r, steps, pipeline = _branches(home, project, "settings:\n  continue_on_step_failure: true\n")
    assert r.rc != 0, r.out + r.err
    status = {n: s["status"] for n, s in steps.items()}
    assert status == {"breaks": "Failed", "slow": "Completed", "after_slow": "Completed", "after_breaks": "Canceled"}
    assert "upstream step breaks failed" in steps["after_breaks"]["error"]
    assert pipeline["status"] == "Failed"


SWEEP_TRIAL = """\
import argparse, os
from azureml.core.run import Run
p = argparse.ArgumentParser()
for a in ("--data", "--scale", "--offset", "--model", "--summary"):
    p.add_argument(a)
a = p.parse_args()
score = float(open(os.path.join(a.data, "value.txt")).read()) * float(a.scale) + float(a.offset)
Run.get_context().log("score", score)
with open(os.path.join(a.model, "result.txt"), "w") as f:
    f.write(f"{score:g} from scale {a.scale}\\n")
with open(a.summary, "w") as f:
    f.write(f"score {score:g}\\n")
"""

TRIAL_COMPONENT = """\
$schema: https://azuremlschemas.azureedge.net/latest/commandComponent.schema.json
type: command
name: scaled
version: 1
code: ./trial-src
inputs:
  data:
    type: uri_folder
  scale:
    type: number
    default: 1
  offset:
    type: integer
    default: 0
outputs:
  model:
    type: uri_folder
  summary:
    type: uri_file
command: >-
  python trial.py --data ${{inputs.data}} --scale ${{inputs.scale}} --offset ${{inputs.offset}}
  --model ${{outputs.model}} --summary ${{outputs.summary}}
"""

SWEEP_PIPELINE = """\
$schema: https://azuremlschemas.azureedge.net/latest/pipelineJob.schema.json
type: pipeline
outputs:
  best_model:
    type: uri_folder
    path: ./published/best_model
  best_summary:
    type: uri_file
    path: ./published/summary.txt
jobs:
  prep:
    type: command
    command: echo 10 > ${{outputs.data}}/value.txt
    outputs:
      data:
        type: uri_folder
  tune:
    type: sweep
    trial: ./trial.yml
    inputs:
      data: ${{parent.jobs.prep.outputs.data}}
      offset: 1
    outputs:
      model: ${{parent.outputs.best_model}}
      summary: ${{parent.outputs.best_summary}}
    sampling_algorithm: grid
    search_space:
      scale:
        type: choice
        values: [1, 3, 2]
    objective:
      goal: maximize
      primary_metric: score
    limits:
      max_total_trials: 3
      max_concurrent_trials: 2
  use:
    type: command
    command: cp ${{inputs.model}}/result.txt ${{outputs.report}}/report.txt
    inputs:
      model: ${{parent.jobs.tune.outputs.model}}
    outputs:
      report:
        type: uri_folder
"""


def test_sweep_step_hands_its_best_trials_outputs_downstream(home, project):
    write(project, "pipe/trial-src/trial.py", SWEEP_TRIAL)
    write(project, "pipe/trial.yml", TRIAL_COMPONENT)
    write(project, "pipe/pipeline.yml", SWEEP_PIPELINE)
    r = run_mltrain("job", "create", "--file", "pipe/pipeline.yml", cwd=project, timeout=240)
    assert r.rc == 0, r.out + r.err
    found = {x["id"]: x for x in runs(home)}
    steps = {i.rsplit(".", 1)[1]: x for i, x in found.items() if "." in i and "-sweep" not in i}
    assert {n: s["status"] for n, s in steps.items()} == {"prep": "Completed", "tune": "Completed", "use": "Completed"}
    trials = [x for i, x in found.items() if "-sweep" in i]
    assert len(trials) == 3 and all(t["status"] == "Completed" for t in trials)
    record = json.loads((Path(steps["tune"]["dir"]) / "sweep_step.json").read_text())
    assert record["best_value"] == 31 and record["best_params"] == {"job.params.scale": 3}
    best = found[record["best_run_id"]]
    assert (Path(best["dir"]) / "outputs" / "model" / "result.txt").read_text() == "31 from scale 3\n"
    assert (Path(steps["tune"]["dir"]) / "outputs" / "model" / "result.txt").read_text() == "31 from scale 3\n"
    assert (Path(steps["use"]["dir"]) / "outputs" / "report" / "report.txt").read_text() == "31 from scale 3\n"
    # the pipeline's outputs with a path of their own hold the best trial's: a link to the folder, the file itself
    published = project / "pipe" / "published"
    assert (published / "best_model").is_symlink() and (published / "best_model" / "result.txt").read_text() == \
        "31 from scale 3\n"
    assert (published / "summary.txt").read_text() == "score 31\n"
    again = run_mltrain("job", "create", "--file", "pipe/pipeline.yml", cwd=project, timeout=240)
    assert again.rc == 0 and again.out.count("reused") >= 3, again.out + again.err  # the sweep step too


SLOW_TRIAL = """\
import sys, time
from azureml.core.run import Run
for i in range(60):
    Run.get_context().log("m", float(sys.argv[1]) + i)
    time.sleep(0.5)
"""


def test_a_stopped_pipeline_cancels_its_sweep_steps_trials(home, project):
    write(project, "pipe/src/t.py", SLOW_TRIAL)
    write(project, "pipe/t.yml", "type: command\nname: t\ncode: ./src\ninputs:\n  x:\n    type: number\n"
                                 "    default: 1\ncommand: python t.py ${{inputs.x}}\n")
    write(project, "pipe/p.yml", """\
        type: pipeline
        jobs:
          breaks:
            command: sleep 2; exit 4
          tune:
            type: sweep
            trial: ./t.yml
            sampling_algorithm: grid
            search_space:
              x: {type: choice, values: [1, 2]}
            objective: {goal: maximize, primary_metric: m}
            limits: {max_total_trials: 2, max_concurrent_trials: 2}
        """)
    # no grace for the ranks: the sweep step, which records its trials' ends, is given its own on top
    r = run_mltrain("job", "create", "--file", "pipe/p.yml", "run.kill_grace_s=0", cwd=project, timeout=180)
    assert r.rc != 0, r.out + r.err
    status = {x["id"].split(".", 1)[1]: x["status"] for x in runs(home) if "." in x["id"]}
    assert status == {"breaks": "Failed", "tune": "Canceled", "tune-sweep": "Canceled", "tune-sweep_1": "Canceled"}


PACED_TRIAL = """\
import sys, time
from azureml.core.run import Run
for i in range(1, 7):
    Run.get_context().log("m", float(sys.argv[1]) * i)
    time.sleep(float(sys.argv[2]))
"""


def test_a_resumed_pipeline_goes_on_with_its_sweep_steps_sweep(home, project):
    """kill -9 of the pipeline's driver while its sweep step's trials run: `runs resume PIPELINE` runs the
    step again, and the step resumes its sweep (the trials that completed are kept, not run again)."""
    write(project, "pipe/src/t.py", PACED_TRIAL)
    write(project, "pipe/t.yml", "type: command\nname: t\ncode: ./src\ninputs:\n  x:\n    type: number\n"
                                 "    default: 1\n  pause:\n    type: number\n    default: 0.5\n"
                                 "command: python t.py ${{inputs.x}} ${{inputs.pause}}\n")
    write(project, "pipe/p.yml", """\
        type: pipeline
        jobs:
          tune:
            type: sweep
            trial: ./t.yml
            inputs: {pause: 0.6}
            sampling_algorithm: grid
            search_space:
              x: {type: choice, values: [1, 3, 2, 4]}
            objective: {goal: maximize, primary_metric: m}
            limits: {max_total_trials: 4, max_concurrent_trials: 2}
        """)
    driver = subprocess.Popen(mltrain_exe() + ["job", "create", "--file", "pipe/p.yml"], cwd=project,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def two_trials_done_one_running():
        trials = [x for x in runs(home) if "-sweep" in x["id"]]
        status = [t["status"] for t in trials]
        running = [t for t in trials if t["status"] == "Running" and t.get("ranks", {}).get("0", {}).get("pid")]
        return trials if status.count("Completed") >= 2 and running else None

    until(two_trials_done_one_running, 120, "two trials completed and one running")
    driver.kill()
    driver.wait(timeout=30)
    kept = {x["id"] for x in runs(home) if "-sweep" in x["id"] and x["status"] == "Completed"}
    pipeline = next(x for x in runs(home) if "." not in x["id"] and "-sweep" not in x["id"])
    resumed = run_mltrain("runs", "resume", pipeline["id"], cwd=project, timeout=240)
    assert resumed.rc == 0, resumed.out + resumed.err
    found = {x["id"]: x for x in runs(home)}
    trials = {i: x for i, x in found.items() if "-sweep" in i}
    assert len(trials) == 4 and all(t["status"] == "Completed" for t in trials.values()), trials
    assert all(not trials[i].get("attempts") for i in kept), "a trial that had completed was run again"
    tune = next(x for i, x in found.items() if i.endswith(".tune"))
    assert tune["status"] == "Completed" and found[pipeline["id"]]["status"] == "Completed"
    record = json.loads((Path(tune["dir"]) / "sweep_step.json").read_text())
    assert record["best_value"] == 24 and record["best_params"] == {"job.params.x": 4}
    assert "runs resume" in (Path(tune["dir"]) / "logs" / "rank_0.log").read_text()
