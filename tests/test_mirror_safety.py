"""The command's end is the data's end (issue 39, item 1): when `mltrain` returns, its runs are in MLflow's
store and no process of it is left; a command killed while it mirrors leaves the store whole, and the next
command finishes the mirror. Real processes, the real embedded SQLite store, read back with MLflow's client."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support import killed_after, mltrain_exe, run_mltrain, runs

pytestmark = pytest.mark.tracking

CURVE = ["job=script", "job.script=curve.py", "job.arguments=[--pause,0.05]"]  # 6 values of `score`
PIPELINE = """\
steps:
  first:
    overrides: [job=script, job.script=curve.py, 'job.arguments=[--pause,0.05]']
  second:
    overrides: [job=script, job.script=curve.py, 'job.arguments=[--pause,0.05]']
    after: [first]
"""


def client(home: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def processes_of(home: Path) -> list:
    """Processes started for this test's MLTRAIN_HOME (every mltrain process inherits it)."""
    found = []
    mark = f"MLTRAIN_HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if mark in env:
            found.append(f"{entry.name}: {cmd}")
    return found


def mirrored_now(run_dir: Path) -> dict:
    """run.json, which must already say the mirror has copied the run as it ended (no waiting)."""
    data = json.loads((run_dir / "run.json").read_text())
    assert (data.get("mlflow") or {}).get("status") == data["status"], (run_dir.name, data.get("mlflow"))
    return data


@pytest.mark.parametrize("what", ["run", "failed run", "sweep", "pipeline"])
def test_a_command_returns_with_its_runs_in_mlflow_and_nothing_of_it_running(home, project, what):
    if what == "pipeline":
        (project / "conf" / "pipeline").mkdir(parents=True)
        (project / "conf" / "pipeline" / "two.yaml").write_text(PIPELINE)
    args = {"run": CURVE,
            "failed run": ["job=script", "job.script=fail_rank.py", "+job.params.FAIL_RANK=0",
                           "+job.params.FAIL_AFTER=0"],
            "sweep": ["-m", "job=script", "job.script=rerun_me.py", "+job.params.x=1,2"],
            "pipeline": ["pipeline=two"]}[what]
    r = run_mltrain(*args, cwd=project, timeout=180)
    assert (r.rc == 0) == (what != "failed run"), r.out + r.err
    time.sleep(1.0)
    assert processes_of(home) == [], f"still running 1 s after `mltrain {' '.join(args)}` returned"
    made = runs(home)
    assert made and all(d["status"] in ("Completed", "Failed") for d in made)
    c = client(home)
    for made_run in made:
        folder = Path(made_run["dir"])
        data = mirrored_now(folder)
        run = c.get_run(data["mlflow"]["run_id"])
        assert run.info.status == {"Completed": "FINISHED", "Failed": "FAILED"}[data["status"]]
        if data["status"] == "Completed" and what != "sweep" and (folder / "metrics.jsonl").is_file():  # curve.py: once each
            assert [m.value for m in c.get_metric_history(run.info.run_id, "score")] == \
                [json.loads(x)["value"] for x in (folder / "metrics.jsonl").read_text().splitlines()
                 if json.loads(x)["name"] == "score"]
    assert not list((home / "mirror-pending").glob("*.json"))


#: Fractions of a whole command's time on this machine, measured first: killed before, while and after the
#: run and its mirror end. (Fixed seconds, 0.2..2.15 s, killed every command in a CI whose machine was slower.)
FRACTIONS = [0.1 + 0.1 * i for i in range(20)]  # 0.1 .. 2.0


def test_a_command_killed_at_any_moment_leaves_a_store_the_next_command_completes(home, project, tmp_path):
    (project / "model").mkdir()
    (project / "model" / "weights.pt").write_bytes(b"w")
    # the first run makes the store (from the run template) and warms this machine's caches
    assert run_mltrain(*CURVE, "run.id=warm", cwd=project, timeout=120).rc == 0
    began = time.monotonic()
    assert run_mltrain(*CURVE, "run.id=timed", cwd=project, timeout=120).rc == 0
    delays = [f * (time.monotonic() - began) for f in FRACTIONS]
    outcomes = []
    for i, delay in enumerate(delays):
        run_id = f"k{i}"
        outcomes.append(killed_after([*mltrain_exe(), *CURVE, f"run.id={run_id}"], delay, cwd=project))
        if not (home / "runs" / run_id / "run.json").is_file():
            continue  # killed before the run existed: nothing to mirror
        shown = run_mltrain("runs", "show", run_id, cwd=project, timeout=120)
        assert shown.rc == 0 and "Traceback" not in shown.err, (delay, shown.out, shown.err)
        reg = run_mltrain("models", "register", f"m{i}", "--path", str(project / "model"), cwd=project, timeout=120)
        assert reg.rc == 0 and "Traceback" not in reg.err, (delay, reg.out, reg.err)
    assert "killed" in outcomes and "finished" in outcomes, outcomes
    # what no look has seen end yet (a run killed with its driver) is caught up by `runs sync`
    assert run_mltrain("runs", "sync", cwd=project, timeout=300).rc == 0
    c = client(home)
    for made_run in runs(home):
        folder = Path(made_run["dir"])
        data = mirrored_now(folder)
        run = c.get_run(data["mlflow"]["run_id"])
        assert run.data.tags["mltrain.run_id"] == folder.name
        logged = [json.loads(x)["value"] for x in (folder / "metrics.jsonl").read_text().splitlines()
                  if json.loads(x)["name"] == "score"] if (folder / "metrics.jsonl").is_file() else []
        # each value once: a mirror killed before its mark and redone wrote the same rows, not new ones
        assert [m.value for m in c.get_metric_history(run.info.run_id, "score")] == logged
    found = c.search_runs([e.experiment_id for e in c.search_experiments()], max_results=1000)
    ids = [r.data.tags.get("mltrain.run_id") for r in found]
    assert len(ids) == len(set(ids)), "a run mirrored twice"
    print(f"\ncommands killed at {delays[0]:.2f}..{delays[-1]:.2f}s: {outcomes}")
