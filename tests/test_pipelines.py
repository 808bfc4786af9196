"""Pipelines (issue 13): seed 000's MpiStep between a prepare and a scoring step, with real
processes, real `mpirun`, and on the test Slurm cluster a graph queued whole with afterok."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from mpi_support import require_mpi
from support import leftovers, mltrain_exe, run_mltrain

PIPELINE = """\
steps:
  prepare:
    overrides: [job=script, job.source_directory=pipeline, job.script=prep.py,
                'job.arguments=[--raw,${inputs.raw},--out,${outputs.data}]']
    params: {scale: 2}
    inputs: {raw: raw}
    outputs: [data]
    hash_paths: [prep.py]
  train:
    overrides: [job=script, job.source_directory=pipeline, job.script=mpi_train.py, distribution=mpi,
                distribution.process_count_per_node=2, 'job.arguments=[--data,${inputs.data},--model,${outputs.model}]']
    inputs: {data: prepare.outputs.data}
    outputs: [model]
    hash_paths: [mpi_train.py]
  score:
    overrides: [job=script, job.source_directory=pipeline, job.script=score.py,
                'job.arguments=[--model,${inputs.model},--data,${inputs.data},--out,${outputs.scores}]']
    inputs: {model: train.outputs.model, data: prepare.outputs.data}
    outputs: [scores]
    hash_paths: [score.py]
  side:
    overrides: [job=script, job.source_directory=pipeline, job.script=side.py,
                'job.arguments=[--out,${outputs.note},--sleep,${oc.env:SIDE_SLEEP,0}]']
    outputs: [note]
    hash_paths: [side.py]
"""


@pytest.fixture
def pipeline_project(project) -> Path:
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "seed000.yaml").write_text(PIPELINE)
    (project / "raw").mkdir()
    (project / "raw" / "a.txt").write_text("1 2 3 4\n")
    return project


def pipelines(home: Path) -> list:
    root = home / "runs"
    if not root.is_dir():
        return []
    found = [json.loads((d / "run.json").read_text()) for d in root.iterdir() if (d / "run.json").is_file()]
    return sorted((r for r in found if r.get("pipeline")), key=lambda r: r["created"])


def step_run(pipeline: dict, step: str) -> dict:
    return json.loads((Path(pipeline["pipeline"]["steps"][step]["run_dir"]) / "run.json").read_text())


def statuses(pipeline: dict) -> dict:
    return {name: info["status"] for name, info in pipeline["pipeline"]["steps"].items()}


def ran(pipeline: dict) -> set:
    """The steps that ran (were not reused)."""
    return {n for n, i in pipeline["pipeline"]["steps"].items() if i["status"] == "Completed" and not i["reused_from"]}


def scores(pipeline: dict) -> list:
    out = Path(pipeline["pipeline"]["steps"]["score"]["run_dir"]) / "outputs" / "scores" / "scores.txt"
    return [float(x) for x in out.read_text().split()]


@pytest.mark.slow
def test_seed000_locally_runs_reuses_and_reruns_what_changed(home, pipeline_project):
    require_mpi()
    proj = pipeline_project
    first = run_mltrain("pipeline=seed000", cwd=proj, timeout=180)
    assert first.rc == 0, first.out + first.err
    p1 = pipelines(home)[-1]
    assert p1["status"] == "Completed" and ran(p1) == {"prepare", "train", "score", "side"}
    model = json.loads((Path(p1["pipeline"]["steps"]["train"]["run_dir"]) / "outputs/model/model.json").read_text())
    assert model == {"total": 20.0, "world_size": 2}  # both MPI ranks summed the prepared data (scale 2)
    assert scores(p1) == [0.1, 0.2, 0.3, 0.4]
    train = step_run(p1, "train")
    assert train["distribution"] == "mpi" and train["world"]["world_size"] == 2
    # the MPI step read the prepared data in place, by path, in its arguments and its environment
    assert p1["pipeline"]["steps"]["prepare"]["run_dir"] + "/outputs/data" in " ".join(train["command"])
    prepare_log = Path(p1["pipeline"]["steps"]["prepare"]["run_dir"]) / "logs" / "rank_0.log"
    assert "input env " + str(proj / "raw") in prepare_log.read_text()

    # the same pipeline again: every step reused, outputs linked (not copied); how much faster is benchmarks/bench_pipelines.py's
    second = run_mltrain("pipeline=seed000", cwd=proj, timeout=120)
    assert second.rc == 0, second.out + second.err
    p2 = pipelines(home)[-1]
    assert p2["status"] == "Completed" and ran(p2) == set()
    assert {i["reused_from"] for i in p2["pipeline"]["steps"].values()} == {
        i["run_id"] for i in p1["pipeline"]["steps"].values()}
    assert second.out.count("reused: run ") == 4
    link = Path(p2["pipeline"]["steps"]["score"]["run_dir"]) / "outputs" / "scores"
    assert link.is_symlink() and scores(p2) == scores(p1)

    # one step's source edited: that step reruns, and so does what reads its (changed) output
    prep = proj / "pipeline" / "prep.py"
    prep.write_text(prep.read_text().replace("str(x * scale)", "str(x * scale + 1)"))
    third = run_mltrain("pipeline=seed000", cwd=proj, timeout=180)
    assert third.rc == 0, third.out + third.err
    p3 = pipelines(home)[-1]
    assert ran(p3) == {"prepare", "train", "score"}, p3["pipeline"]["steps"]
    assert "[prepare] runs: source file prep.py changed" in third.out
    assert "[train] runs: input data: content changed" in third.out
    assert "[side] reused: run " in third.out

    # a comment in the MPI step's script: it reruns, its model is byte-identical, so scoring is reused
    train_py = proj / "pipeline" / "mpi_train.py"
    train_py.write_text(train_py.read_text() + "# a comment\n")
    fourth = run_mltrain("pipeline=seed000", cwd=proj, timeout=180)
    p4 = pipelines(home)[-1]
    assert fourth.rc == 0 and ran(p4) == {"train"}, fourth.out
    assert "[train] runs: source file mpi_train.py changed" in fourth.out

    # a param reaches its step as AML_PARAMETER_scale, and the console says what changed
    fifth = run_mltrain("pipeline=seed000", "pipeline.steps.prepare.params.scale=4", cwd=proj, timeout=180)
    p5 = pipelines(home)[-1]
    assert fifth.rc == 0 and ran(p5) == {"prepare", "train", "score"}, fifth.out
    assert "[prepare] runs: param scale 2 -> 4" in fifth.out
    assert json.loads((Path(p5["pipeline"]["steps"]["train"]["run_dir"]) / "outputs/model/model.json")
                      .read_text())["total"] == 44.0

    # --force-rerun (Azure's regenerate_outputs) reuses nothing
    sixth = run_mltrain("pipeline=seed000", "pipeline.steps.prepare.params.scale=4", "--force-rerun", cwd=proj,
                        timeout=180)
    assert sixth.rc == 0 and ran(pipelines(home)[-1]) == {"prepare", "train", "score", "side"}, sixth.out


@pytest.mark.slow
def test_external_input_content_change_at_the_same_path_reruns_its_readers(home, pipeline_project):
    """Azure's blind spot: it hashes a dataset's definition, so new data at the same path is not seen."""
    require_mpi()
    proj = pipeline_project
    assert run_mltrain("pipeline=seed000", cwd=proj, timeout=180).rc == 0
    raw = proj / "raw" / "a.txt"
    stat = raw.stat()
    raw.write_text("4 3 2 1\n")  # same size, same name
    os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same mtime: only the content tells
    again = run_mltrain("pipeline=seed000", cwd=proj, timeout=180)
    assert again.rc == 0, again.out + again.err
    p = pipelines(home)[-1]
    assert "[prepare] runs: input raw: content changed" in again.out
    assert ran(p) == {"prepare", "train", "score"}, again.out  # and side, which does not read it, is reused
    assert scores(p) == [0.4, 0.3, 0.2, 0.1]


@pytest.mark.slow
def test_failing_middle_step_cancels_its_dependants_and_the_other_branch_completes(home, pipeline_project):
    require_mpi()
    r = run_mltrain("pipeline=seed000", "+pipeline.steps.train.params.fail=1", cwd=pipeline_project, timeout=180,
                    env={"SIDE_SLEEP": "2"})
    assert r.rc == 1, r.out + r.err
    p = pipelines(home)[-1]
    assert statuses(p) == {"prepare": "Completed", "train": "Failed", "score": "Canceled", "side": "Completed"}
    assert step_run(p, "score")["error"] == "upstream step train failed"
    assert p["status"] == "Failed" and p["error"] == "step train failed"
    assert "[score] Canceled" in r.out and "Traceback" not in r.out + r.err
    show = run_mltrain("runs", "show", p["id"], cwd=pipeline_project)
    assert "upstream step train failed" in show.out and "score" in show.out


@pytest.mark.slow
def test_continue_on_step_failure_false_stops_the_other_branch_too(home, pipeline_project):
    require_mpi()
    r = run_mltrain("pipeline=seed000", "+pipeline.steps.train.params.fail=1", "pipeline.continue_on_step_failure=false",
                    cwd=pipeline_project, timeout=180, env={"SIDE_SLEEP": "20"})
    assert r.rc == 1, r.out + r.err
    p = pipelines(home)[-1]
    assert statuses(p) == {"prepare": "Completed", "train": "Failed", "score": "Canceled", "side": "Canceled"}
    assert step_run(p, "side")["error"] == "canceled: step train failed and continue_on_step_failure is false"
    assert p["status"] == "Failed" and p["error"] == "step train failed"


@pytest.mark.slow
def test_cancel_a_running_pipeline_cancels_its_steps(home, pipeline_project):
    proc = subprocess.Popen([*mltrain_exe(), "pipeline=seed000"], cwd=pipeline_project, text=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env={**os.environ, "SIDE_SLEEP": "60"})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = pipelines(home)
        if found and statuses(found[-1]).get("side") == "Running":
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the side step never ran")
    r = run_mltrain("runs", "cancel", found[-1]["id"], cwd=pipeline_project)
    assert r.rc == 0 and r.out.strip().endswith("Canceled"), r.out + r.err
    proc.wait(timeout=60)
    p = pipelines(home)[-1]
    assert p["status"] == "Canceled" and statuses(p)["side"] == "Canceled"


BAD = {
    "cycle": ("  a:\n    overrides: [job=command, 'job.command=true']\n    after: [b]\n"
              "  b:\n    overrides: [job=command, 'job.command=true']\n    after: [a]\n",
              "pipeline.steps: the steps form a cycle: a -> b -> a"),
    "missing_step": ("  a:\n    overrides: [job=command, 'job.command=true']\n    inputs: {x: nosuch.outputs.y}\n",
                     "pipeline.steps.a.inputs.x: no step 'nosuch' in this pipeline (allowed: a)"),
    "missing_output": ("  a:\n    overrides: [job=command, 'job.command=true']\n    outputs: [m]\n"
                       "  b:\n    overrides: [job=command, 'job.command=true']\n    inputs: {x: a.outputs.model}\n",
                       "pipeline.steps.b.inputs.x: step 'a' has no output 'model' (allowed: m)"),
    "unknown_key": ("  a:\n    overrides: [job=command, 'job.command=true']\n    outputz: [m]\n", "outputz"),
    "missing_path": ("  a:\n    overrides: [job=command, 'job.command=true']\n    inputs: {raw: no/such/dir}\n",
                     "pipeline.steps.a.inputs.raw: 'no/such/dir' does not exist"),
    "bad_step_config": ("  a:\n    overrides: [job=script, job.script=nosuch.py]\n",
                        "pipeline.steps.a: job.script: file 'nosuch.py' does not exist"),
    "values_not_a_mapping": ("  a:\n    overrides: [job=command]\n    values: [job.command=true]\n",
                             "pipeline/bad: Cannot merge DictConfig with ListConfig"),
    "bad_value": ("  a:\n    overrides: [job=command]\n    values: {job: {command: true, nosuch: 1}}\n",
                  "pipeline.steps.a: "),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_invalid_pipeline_is_one_line_and_creates_nothing(home, project, case):
    text, expected = BAD[case]
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "bad.yaml").write_text("steps:\n" + text)
    r = run_mltrain("pipeline=bad", cwd=project)
    assert r.rc == 2, r.out + r.err
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mltrain: error: ") and expected in lines[0], r.err
    assert leftovers(home) == []


VALUES = """\
steps:
  echo:
    overrides: [job=script, job.script=echo_args.py]
    values:
      job: {arguments: ["it's, [odd] {x}", "$HOME", 0.1, "${outputs.out}/a b.txt"], params: {lr: 0.25}}
      environment: {environment_variables: {GREETING: from-values}}
    outputs: [out]
"""


def test_a_steps_values_reach_its_program_as_written_and_the_command_line_still_wins(home, project):
    """`values:` are typed YAML, not override text: quotes, commas, brackets and a float arrive as written,
    `${outputs.out}` is the step's folder; an override on the command line wins over a value."""
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "values.yaml").write_text(VALUES)
    (project / "echo_args.py").write_text("import json, os, sys\nprint('ARGS', json.dumps(sys.argv[1:]))\n"
                                          "print('LR', os.environ['AML_PARAMETER_lr'], os.environ['GREETING'])\n")
    r = run_mltrain("pipeline=values", "++environment.environment_variables.GREETING=from-cli", cwd=project)
    assert r.rc == 0, r.out + r.err
    step = next(d for d in (home / "runs").iterdir() if d.name.endswith(".echo"))
    log = (step / "logs" / "rank_0.log").read_text()
    args = json.loads(log.split("ARGS ", 1)[1].splitlines()[0])
    # a `$VAR` is the variable's value, as Azure passes a script's arguments
    assert args == ["it's, [odd] {x}", os.environ["HOME"], "0.1", f"{step}/outputs/out/a b.txt"], log
    assert "LR 0.25 from-cli" in log, log


def test_unknown_pipeline_and_sweeping_a_pipeline_are_refused(home, pipeline_project):
    r = run_mltrain("pipeline=seed00", cwd=pipeline_project)
    assert r.rc == 2 and "'seed00' is not a known pipeline (closest: seed000)" in r.err
    r = run_mltrain("-m", "pipeline=seed000", "pipeline.steps.prepare.params.scale=1,2", cwd=pipeline_project)
    assert r.rc == 2 and "a pipeline runs once" in r.err and len(r.err.strip().splitlines()) == 1
    assert leftovers(home) == []


def test_local_pipeline_cannot_detach_and_dry_run_creates_nothing(home, pipeline_project):
    r = run_mltrain("pipeline=seed000", "--detach", cwd=pipeline_project)
    assert r.rc == 2 and "only a pipeline whose every step runs on Slurm can be detached" in r.err
    r = run_mltrain("pipeline=seed000", "--dry-run", cwd=pipeline_project)
    assert r.rc == 0, r.err
    assert "pipeline seed000 (dry run): 4 steps" in r.out
    assert "train: after [prepare]  inputs [data<-prepare.outputs.data]  outputs [model]" in r.out
    assert "AML_PARAMETER_scale=2" in r.out and "AZUREML_DATAREFERENCE_raw=" + str(pipeline_project / "raw") in r.out
    assert leftovers(home) == []


# ------------------------------------------------------------------------------------------ Slurm
@pytest.mark.slow
def test_seed000_on_slurm_queues_the_whole_graph_with_afterok_and_detaches(home, pipeline_project):
    from slurm_support import require_cluster

    require_cluster()
    start = time.monotonic()
    r = run_mltrain("pipeline=seed000", "compute=slurm", "--detach", cwd=pipeline_project, timeout=120,
                    env={"SIDE_SLEEP": "3"})
    returned = time.monotonic() - start
    assert r.rc == 0, r.out + r.err
    p = pipelines(home)[-1]
    jobs = {n: step_run(p, n)["slurm"]["job_id"] for n in p["pipeline"]["steps"]}
    assert "detached: pipeline" in r.out
    assert p["status"] not in ("Completed", "Failed"), "returned before the graph ran"  # side sleeps 3 s
    deps = {}
    for name, job in jobs.items():  # Slurm itself holds each step's job until its parents' end
        out = subprocess.run(["scontrol", "show", "job", job], capture_output=True, text=True).stdout
        deps[name] = next((w.split("=", 1)[1] for w in out.split() if w.startswith("Dependency=")), "(null)")
    if all(d == "(null)" for d in deps.values()):  # the controller forgets a dependency once it is met
        pytest.skip(f"the graph ran before it could be inspected ({returned:.1f}s)")
    assert deps["side"] == "(null)" and deps["prepare"] == "(null)"
    assert deps["score"] == "(null)" or (jobs["train"] in deps["score"] and deps["score"].startswith("afterok:")), deps
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = run_mltrain("runs", "status", p["id"], cwd=pipeline_project).out.split()
        if status[1] in ("Completed", "Failed", "Canceled"):
            break
        time.sleep(1)
    assert status[1] == "Completed", status
    p = pipelines(home)[-1]
    assert scores(p) == [0.1, 0.2, 0.3, 0.4]
    assert step_run(p, "train")["world"]["world_size"] == 2
    # the second run reuses every step: the detached graph's outputs were digested when it was looked at
    again = run_mltrain("pipeline=seed000", "compute=slurm", cwd=pipeline_project, timeout=120)
    assert again.rc == 0 and ran(pipelines(home)[-1]) == {"side"}, again.out
    assert "[side] runs: config job.arguments[3] 3 -> 0" in again.out  # its sleep was changed: it alone reruns


@pytest.mark.slow
def test_slurm_failing_step_has_its_dependants_removed_by_slurm(home, pipeline_project):
    from slurm_support import require_cluster, sacct_settles

    require_cluster()
    r = run_mltrain("pipeline=seed000", "compute=slurm", "+pipeline.steps.train.params.fail=1", cwd=pipeline_project,
                    timeout=180)
    assert r.rc == 1, r.out + r.err
    p = pipelines(home)[-1]
    assert statuses(p) == {"prepare": "Completed", "train": "Failed", "score": "Canceled", "side": "Completed"}
    score = step_run(p, "score")
    assert score["error"] == "upstream step train failed"
    assert sacct_settles(score["slurm"]["job_id"]) == "CANCELLED"  # Slurm removed it: it never ran
