"""`mltrain runs resume PIPELINE` (issue 27): a pipeline whose driver was killed with SIGKILL mid-step, or
whose step failed, continues in its own run directories: completed steps are kept untouched, the others
run again, parents first. Real processes; the killed driver's ranks are stopped by the local guard."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import mltrain_exe, run_mltrain, slow_to_snapshot, until

pytestmark = pytest.mark.slow

PIPELINE = """\
steps:
  prepare:
    overrides: [job=command, 'job.command="echo data > ${outputs.data}/data.txt"']
    outputs: [data]
  train:
    overrides: [job=script, job.script=stall_once.py, 'job.arguments=[${inputs.data},${outputs.model},FLAG]']
    inputs: {data: prepare.outputs.data}
    outputs: [model]
  score:
    overrides: [job=command, 'job.command="cat ${inputs.model}/model.txt > ${outputs.scores}/scores.txt"']
    inputs: {model: train.outputs.model}
    outputs: [scores]
"""

#: The first attempt leaves a flag and stalls (or fails); any later attempt trains at once.
STALL_ONCE = """\
import os, sys, time
data, model, flag, mode = sys.argv[1], sys.argv[2], sys.argv[3], os.environ.get("STALL_MODE", "sleep")
if not os.path.exists(flag):
    open(flag, "w").close()
    if mode == "fail":
        sys.exit(3)
    time.sleep(300)
open(os.path.join(model, "model.txt"), "w").write(open(os.path.join(data, "data.txt")).read().strip() + " trained")
"""


@pytest.fixture
def chain(project, tmp_path) -> Path:
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "stall.yaml").write_text(PIPELINE.replace("FLAG", str(tmp_path / "flag")))
    (project / "stall_once.py").write_text(STALL_ONCE)
    return project


def _pipeline(home: Path) -> dict:
    found = [json.loads((d / "run.json").read_text()) for d in (home / "runs").iterdir() if (d / "run.json").is_file()]
    return next(r for r in found if r.get("pipeline"))


def _step(home: Path, pipe: dict, name: str) -> dict:
    return json.loads((Path(pipe["pipeline"]["steps"][name]["run_dir"]) / "run.json").read_text())


def _alive(pattern: str) -> list:
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    return [int(p) for p in out if int(p) != os.getpid()]


def test_a_pipeline_whose_driver_was_killed_resumes_only_the_steps_that_did_not_complete(home, chain, tmp_path):
    driver = subprocess.Popen([*mltrain_exe(), "pipeline=stall"], cwd=chain, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        # the step is Running before its script has left the flag (on a loaded machine, long before)
        until(lambda: _stalled(home) and (tmp_path / "flag").exists(), 120, "train to stall")
        prepare_before = _step(home, _pipeline(home), "prepare")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
        until(lambda: not _alive("stall_once.py"), 30, "the killed driver's train rank to be stopped")
    finally:
        if driver.poll() is None:
            driver.kill()
    pipe = _pipeline(home)
    started = time.monotonic()
    r = run_mltrain("runs", "resume", pipe["id"], cwd=chain, timeout=240)
    took = time.monotonic() - started
    assert r.rc == 0, r.out + r.err
    assert "kept (completed) [prepare]; running again [train, score]" in r.out
    pipe = _pipeline(home)
    assert pipe["status"] == "Completed" and [pipe["pipeline"]["steps"][s]["status"] for s in ("prepare", "train", "score")] \
        == ["Completed"] * 3
    # prepare was kept: the same record, not run again
    assert _step(home, pipe, "prepare")["phases"] == prepare_before["phases"]
    train = _step(home, pipe, "train")
    assert len(train["attempts"]) == 1 and "driver lost" in (train["attempts"][0]["error"] or "")
    scores = Path(pipe["pipeline"]["steps"]["score"]["run_dir"]).rglob("scores.txt")
    assert [p.read_text().strip() for p in scores][0] == "data trained"
    assert not _alive("stall_once.py")
    print(f"\npipeline resumed: prepare kept, train and score ran again, {took:.1f} s")


def _stalled(home: Path) -> bool:
    try:
        pipe = _pipeline(home)
        return _step(home, pipe, "train")["status"] == "Running"
    except (StopIteration, OSError, KeyError, json.JSONDecodeError):
        return False


def test_a_pipeline_with_a_failed_step_resumes_from_that_step(home, chain):
    r = run_mltrain("pipeline=stall", cwd=chain, timeout=240, env={"STALL_MODE": "fail"})
    assert r.rc != 0
    pipe = _pipeline(home)
    assert pipe["status"] == "Failed" and pipe["pipeline"]["steps"]["score"]["status"] == "Canceled"
    r = run_mltrain("runs", "resume", pipe["id"], cwd=chain, timeout=240)
    assert r.rc == 0, r.out + r.err
    pipe = _pipeline(home)
    assert pipe["status"] == "Completed"
    # a completed pipeline is not resumed again
    again = run_mltrain("runs", "resume", pipe["id"], cwd=chain, timeout=60)
    assert again.rc != 0 and "only a Failed or Canceled pipeline can be resumed" in again.err
    assert "Traceback" not in again.err


#: Three steps of the user's own script: each step's run takes a snapshot of the project.
MADE_ONE_BY_ONE = """\
steps:
  prepare:
    overrides: [job=script, job.script=chain_step.py, 'job.arguments=[prepare,"",${outputs.out}]']
    outputs: [out]
  train:
    overrides: [job=script, job.script=chain_step.py, 'job.arguments=[train,${inputs.prev},${outputs.out}]']
    inputs: {prev: prepare.outputs.out}
    outputs: [out]
  score:
    overrides: [job=script, job.script=chain_step.py, 'job.arguments=[score,${inputs.prev},${outputs.out}]']
    inputs: {prev: train.outputs.out}
    outputs: [out]
"""
CHAIN_STEP = """\
import os, sys
name, prev, out = sys.argv[1:4]
before = open(os.path.join(prev, "chain.txt")).read() if prev else ""
open(os.path.join(out, "chain.txt"), "w").write((before + " " + name).strip())
"""


def test_a_pipeline_whose_driver_was_killed_while_making_its_steps_makes_the_rest_when_resumed(home, project):
    """The driver makes the steps' runs one after another before any starts; killed among them, it leaves steps
    named in the pipeline's record whose run was never made (the campaign's seeds 85 and 217). `runs resume`
    makes them from the plans the pipeline kept, and the pipeline completes."""
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "chain.yaml").write_text(MADE_ONE_BY_ONE)
    (project / "chain_step.py").write_text(CHAIN_STEP)
    slow_to_snapshot(project)  # the window in which to kill the driver
    driver = subprocess.Popen([*mltrain_exe(), "pipeline=chain"], cwd=project, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        until(lambda: _made(home, "prepare"), 120, "the first step's run to be made", every_s=0.005)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(timeout=30)
    finally:
        if driver.poll() is None:
            driver.kill()
    pipe = _pipeline(home)
    never = [s for s in ("train", "score") if not (Path(pipe["pipeline"]["steps"][s]["run_dir"]) / "run.json").exists()]
    assert never, "the driver was killed after it had made every step's run: nothing left unmade to test"
    r = run_mltrain("runs", "resume", pipe["id"], cwd=project, timeout=240)
    assert r.rc == 0, r.out + r.err
    assert "Traceback" not in r.err
    pipe = _pipeline(home)
    assert pipe["status"] == "Completed", pipe["pipeline"]["steps"]
    out = Path(pipe["pipeline"]["steps"]["score"]["run_dir"]) / "outputs" / "out" / "chain.txt"
    assert out.read_text() == "prepare train score"
    for name in never:  # made from the kept plan: the same run id and folder the record named, marked as a step
        step = _step(home, pipe, name)
        assert step["id"] == pipe["pipeline"]["steps"][name]["run_id"]
        assert step["pipeline_step"]["pipeline_run"] == pipe["id"] and step["snapshot"]["files"] > 3000
    print(f"\nkilled with {never} never made; resumed to Completed")


def _made(home: Path, step: str) -> bool:
    try:
        return (Path(_pipeline(home)["pipeline"]["steps"][step]["run_dir"]) / "run.json").exists()
    except (StopIteration, OSError, KeyError, json.JSONDecodeError):
        return False
