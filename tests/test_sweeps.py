"""HyperDrive sweeps with real runs: members log known curves (tests/scripts/curve.py), so each
early-termination policy must cancel exactly the members Azure ML's rule names, at the right
interval, locally and on the test Slurm cluster."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from slurm_support import require_cluster, sacct_settles
from support import mltrain_exe, pid_alive, run_mltrain, runs

pytestmark = pytest.mark.slow

CURVES = ["job=script", "job.script=curve.py", "job.arguments=[--curve,$AML_PARAMETER_curve]", "run.console=none"]
FOUR = ["+job.params.curve=a,b,c,d", "sweep.primary_metric=score", "sweep.max_concurrent_runs=4"]
POLICY = "sweep.early_termination."


def sweep_doc(home: Path) -> dict:
    found = list((home / "runs" / "_sweeps").glob("*/sweep.json"))
    assert len(found) == 1, f"expected one sweep.json, found {found}"
    return json.loads(found[0].read_text())


def by_curve(doc: dict) -> dict:
    return {m["params"]["+job.params.curve"]: m for m in doc["members"]}


def records_by_id(home: Path) -> dict:
    return {r["id"]: r for r in runs(home)}


# Hand-worked with Azure ML's rules on the curves of tests/scripts/curve.py:
#   a: 1 2 3 4 5 6   b: 0.9 1.9 2.9 ...   c: 0.5 1.0 1.5 ...   d: 0.1 0.1 0.1 ...
POLICIES = {
    # interval 3: best 3.0 (a); 1.5 * 1.5 < 3 and 0.1 * 1.5 < 3 are cut; nothing before the delay
    "bandit_factor": (["bandit", "slack_factor=0.5", "delay_evaluation=3"], {"c": 3, "d": 3}),
    # interval 1: best 1.0, limit 0.5: d is cut (c's 0.5 is not below it); interval 2: limit 1.5 cuts c
    "bandit_amount": (["bandit", "slack_amount=0.5"], {"d": 1, "c": 2}),
    # interval 2 (delay 2): running averages 1.5 1.4 0.75 0.1, median 1.075: c (best 1.0) and d are cut
    "median_stopping": (["median_stopping", "delay_evaluation=2"], {"c": 2, "d": 2}),
    # 50 %: interval 1 cuts 2 of 4 (d, c); interval 2 cuts 1 of the 2 left (b); a is never cut
    "truncation_selection": (["truncation_selection", "truncation_percentage=50"], {"c": 1, "d": 1, "b": 2}),
}


@pytest.mark.parametrize("name", list(POLICIES))
def test_policy_cancels_exactly_the_members_azures_rule_names(home, project, name):
    policy, expected = POLICIES[name]
    args = [f"{POLICY}policy={policy[0]}"] + [POLICY + p for p in policy[1:]]
    # A member is cut while it runs, so its curve must outlast the controller's reaction on a loaded
    # 2-core machine: a second between values (0.4 s let a cut member finish its curve under load).
    slow = "job.arguments=[--curve,$AML_PARAMETER_curve,--pause,1.0]"
    r = run_mltrain("-m", *CURVES, slow, *FOUR, *args, cwd=project, timeout=240)
    assert r.rc == 0, r.out + r.err
    doc = sweep_doc(home)
    members = by_curve(doc)
    records = records_by_id(home)
    for curve, member in members.items():
        record = records[member["run_id"]]
        if curve in expected:
            assert member["status"] == "Canceled" == record["status"], (curve, member)
            assert member["canceled_at_interval"] == expected[curve], (curve, member)
            reason = f"{policy[0]} at interval {expected[curve]}"
            assert reason in member["canceled_by"] and reason in record["error"]  # the reason is in run.json
            assert f"[#{member['index']}] canceled by {reason}" in r.out  # and on the console
            assert member["intervals"] < 6, "a cut member is really stopped before logging its whole curve"
        else:
            assert member["status"] == "Completed" == record["status"], (curve, member)
            assert member["intervals"] == 6
    assert doc["best_params"] == {"+job.params.curve": "a"} and doc["best_value"] == 6.0
    assert doc["best_run_id"] == members["a"]["run_id"]
    png = Path(doc["sweep_dir"]) / "primary_metric.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    # the summary lists the best first and marks it
    summary = r.out[r.out.index("sweep of 4 runs"):].splitlines()
    assert summary[1].startswith(" *#") and "curve=a" in summary[1]


def test_grid_exhausts_its_points_and_max_concurrent_runs_holds(home, project):
    r = run_mltrain("-m", "job=script", "job.script=curve.py", "job.arguments=[--curve,$AML_PARAMETER_x,--pause,0.3]",
                    "+job.params.x=choice('1,2','2,1')", "+job.params.y=range(0,3)", "sweep.sampling=grid",
                    "sweep.max_total_runs=50", "sweep.max_concurrent_runs=2", "sweep.primary_metric=score",
                    "sweep.goal=minimize", "run.console=none", cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    doc = sweep_doc(home)
    points = sorted((m["params"]["+job.params.x"], m["params"]["+job.params.y"]) for m in doc["members"])
    assert points == sorted((x, y) for x in ("1,2", "2,1") for y in (0, 1, 2)), "every grid point once, no more"
    assert doc["max_total_runs"] == 6 and doc["best_value"] == 1.0
    # from the runs' own phase times: never more than 2 Running at once
    spans = [(r["phases"]["Running"], max(r["phases"].values())) for r in runs(home)]
    assert len(spans) == 6
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2, spans


def test_random_sampling_repeats_with_its_seed(home, project, tmp_path):
    def sampled(seed: int, where: str) -> list:
        env = {"MLTRAIN_HOME": str(tmp_path / where)}
        r = run_mltrain("-m", *CURVES, "job.arguments=[--curve,1,--pause,0]", "+job.params.lr=tag(log,interval(1e-4,1))",
                        "+job.params.depth=range(1,9)", "+job.params.curve=choice(a,b)", "sweep.sampling=random",
                        f"sweep.seed={seed}", "sweep.max_total_runs=3", "sweep.max_concurrent_runs=3", cwd=project, env=env)
        assert r.rc == 0, r.out + r.err
        doc = sweep_doc(tmp_path / where)
        assert doc["seed"] == seed
        return [m["params"] for m in sorted(doc["members"], key=lambda m: m["index"])]

    first, again, other = sampled(7, "one"), sampled(7, "two"), sampled(8, "three")
    assert first == again
    assert first != other
    assert all(1e-4 <= p["+job.params.lr"] <= 1 and p["+job.params.depth"] in range(1, 9) for p in first)


def test_a_failed_member_does_not_stop_the_sweep(home, project):
    r = run_mltrain("-m", "job=script", "job.script=curve.py", "job.arguments=[--pause,0,--mode,$AML_PARAMETER_mode]",
                    "+job.params.mode=fail,ok", "sweep.primary_metric=score", "sweep.max_concurrent_runs=1",
                    "run.console=none", cwd=project, timeout=120)
    assert r.rc == 1, r.out + r.err
    doc = sweep_doc(home)
    status = {m["params"]["+job.params.mode"]: m["status"] for m in doc["members"]}
    assert status == {"fail": "Failed", "ok": "Completed"}
    assert doc["status"] == "Completed" and doc["best_params"] == {"+job.params.mode": "ok"}
    assert "1 of 2 run(s) Failed" in r.out


def test_ctrl_c_cancels_every_member_in_flight(home, project):
    proc = subprocess.Popen(mltrain_exe() + ["-m", *CURVES, "job.arguments=[--curve,'1,2,3,4,5,6,7,8',--pause,5]",
                                             "+job.params.k=1,2,3", "sweep.primary_metric=score",
                                             "sweep.max_concurrent_runs=2"],
                            cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for x in runs(home) if x["status"] == "Running") < 2:
        time.sleep(0.1)
    running = [x for x in runs(home) if x["status"] == "Running"]
    assert len(running) == 2
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    found = runs(home)
    assert len(found) == 2, "no new member starts once the sweep is canceled"
    assert all(x["status"] == "Canceled" and "the sweep was canceled" in x["error"] for x in found)
    for x in found:
        assert not pid_alive(int(x["ranks"]["0"]["pid"]))
    assert sweep_doc(home)["status"] == "Canceled"


def test_max_duration_stops_the_sweep(home, project):
    r = run_mltrain("-m", *CURVES, "job.arguments=[--curve,'1,2,3,4,5,6,7,8',--pause,2]", "+job.params.k=1,2,3,4",
                    "sweep.primary_metric=score", "sweep.max_concurrent_runs=2", "sweep.max_duration_minutes=0.1",
                    cwd=project, timeout=120)
    doc = sweep_doc(home)
    assert doc["stopped_because"] == "sweep.max_duration_minutes (0.1) was reached"
    assert len(doc["members"]) == 2 and all(m["status"] == "Canceled" for m in doc["members"])
    assert r.rc == 0, r.out + r.err  # the limit is the sweep working as asked, not a failure


def test_runs_best_for_scripts(home, project):
    r = run_mltrain("-m", *CURVES, "job.arguments=[--curve,$AML_PARAMETER_v,--pause,0]", "+job.params.v=choice('3,2','1,2')",
                    "sweep.primary_metric=score", "sweep.goal=minimize", cwd=project)
    assert r.rc == 0, r.out + r.err
    doc = sweep_doc(home)
    best = run_mltrain("runs", "best", "--id", cwd=project)
    assert best.rc == 0 and best.out.strip() == doc["best_run_id"]
    assert by_curve_value(doc, "1,2")["run_id"] == doc["best_run_id"]
    shown = run_mltrain("runs", "best", Path(doc["sweep_dir"]).name, "--json", cwd=project)
    assert json.loads(shown.out)["best_value"] == 1.0


def by_curve_value(doc: dict, value: str) -> dict:
    return next(m for m in doc["members"] if m["params"]["+job.params.v"] == value)


@pytest.mark.parametrize("args,message", [
    (["+job.params.x=interval(0,1)", "sweep.sampling=grid"], "+job.params.x: interval(0,1) cannot be sampled by sweep.sampling=grid"),
    (["+job.params.x=tag(log,interval(0.001,1))", "sweep.sampling=bayesian", "sweep.max_total_runs=3", "sweep.primary_metric=m"],
     "cannot be sampled by sweep.sampling=bayesian, which takes only choice, uniform and quniform"),
    (["+job.params.x=1,2", "sweep.sampling=bayesian", "sweep.max_total_runs=3", "sweep.primary_metric=m",
      f"{POLICY}policy=bandit", f"{POLICY}slack_factor=0.1"], "bayesian sampling takes no early termination"),
    (["+job.params.x=1,2", f"{POLICY}policy=median_stopping"], "early termination (median_stopping) needs a primary metric"),
    (["+job.params.x=interval(0,1)", "sweep.sampling=random"], "sweep.max_total_runs: sweep.sampling=random needs a number of runs"),
    (["sweep.primary_metric=m"], "sweep.params: a HyperDrive sweep needs a search space"),
    (["+job.params.x=1,2", "sweep.goal=up"], "sweep.goal: 'up' is not supported (allowed: maximize, minimize)"),
    (["+job.params.x=1,2", "sweep.bogus=1"], "sweep.bogus: unknown key"),
])
def test_invalid_sweeps_say_one_line_and_create_nothing(home, project, args, message):
    r = run_mltrain("-m", "job=script", "job.script=curve.py", *args, cwd=project)
    assert r.rc == 2, r.out + r.err
    assert message in r.err and r.err.count("\n") == 1, r.err
    assert "Traceback" not in r.err
    assert not (home / "runs").exists() or not any((home / "runs").rglob("*")), "nothing is created"


def test_dry_run_samples_the_first_member_and_starts_nothing(home, project):
    r = run_mltrain("-m", *CURVES, "+job.params.lr=interval(0,1)", "sweep.sampling=sobol", "sweep.seed=3",
                    "sweep.max_total_runs=4", "--dry-run", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert "sweep (dry run): sobol sampling, seed 3, 4 runs" in r.out and "first member: " in r.out
    assert "AML_PARAMETER_lr=" in r.out
    assert not (home / "runs").exists() or not any((home / "runs").rglob("*"))


def test_trainer_swept_over_learning_rates_cancels_the_divergent_one(home, project):
    r = run_mltrain("-m", "trainer.learning_rate=choice(0.01,2)", "trainer.epochs=2", "data.image_size=16",
                    "sweep.primary_metric=top1_accuracy", "sweep.max_concurrent_runs=2", f"{POLICY}policy=bandit",
                    f"{POLICY}slack_factor=0.2", "run.console=none", cwd=project, timeout=400)
    assert r.rc == 0, r.out + r.err
    doc = sweep_doc(home)
    members = {m["params"]["trainer.learning_rate"]: m for m in doc["members"]}
    assert members[2]["status"] == "Canceled" and members[2]["canceled_at_interval"] == 1
    assert "bandit at interval 1: best top1_accuracy" in members[2]["canceled_by"]
    assert members[0.01]["status"] == "Completed" and doc["best_params"] == {"trainer.learning_rate": 0.01}
    assert not (Path(members[2]["run_dir"]) / "outputs" / "model").exists(), "the cut member never got to save a model"


def test_bandit_on_slurm_scancels_the_cut_members(home, project):
    require_cluster()
    r = run_mltrain("-m", *CURVES, "compute=slurm", "compute.poll_s=0.3", *FOUR,
                    f"{POLICY}policy=bandit", f"{POLICY}slack_amount=0.5", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    members = by_curve(sweep_doc(home))
    records = records_by_id(home)
    assert {c: m["canceled_at_interval"] for c, m in members.items() if m["status"] == "Canceled"} == {"d": 1, "c": 2}
    for curve in "ab":
        assert members[curve]["status"] == "Completed"
    for curve in "cd":
        job_id = records[members[curve]["run_id"]]["slurm"]["job_id"]
        assert sacct_settles(job_id).startswith("CANCELLED"), "the cut member's Slurm job was scancelled"
        assert "bandit at interval" in records[members[curve]["run_id"]]["error"]


def test_no_sweep_settings_keeps_hydras_plain_grid(home, project):
    r = run_mltrain("-m", *CURVES, "job.arguments=[--curve,1,--pause,0]", "+job.params.k=1,2", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert len(runs(home)) == 2 and not list((home / "runs" / "_sweeps").glob("*/sweep.json"))
    assert os.path.exists(next((home / "runs" / "_sweeps").glob("*/summary.json")))


def _sacct_calls(home: Path, tmp: Path, members: int) -> int:
    """How many times a HyperDrive sweep of `members` 8-second members, all at once on Slurm, ran sacct."""
    wrapper, log = tmp / f"bin{members}", tmp / f"sacct{members}.log"
    wrapper.mkdir()
    (wrapper / "sacct").write_text(f"#!/bin/sh\necho \"$*\" >> {log}\nexec {shutil.which('sacct')} \"$@\"\n")
    (wrapper / "sacct").chmod(0o755)
    values = ",".join(str(i) for i in range(members))
    r = run_mltrain("-m", "job=command", 'job.command="sleep 8"', "compute=slurm", "compute.poll_s=0.5",
                    f"+job.params.i=choice({values})", "sweep.sampling=grid", "sweep.max_concurrent_runs=8",
                    cwd=tmp, timeout=300, env={"PATH": f"{wrapper}:{os.environ['PATH']}",
                                               "MLTRAIN_HOME": str(home / f"home{members}")})
    assert r.rc == 0, r.out + r.err
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_members_followed_at_once_on_slurm_share_one_sacct_per_interval(home, tmp_path):
    """Each member of a HyperDrive sweep is followed on its own (a thread each); accounting is asked once
    per interval for all of them (accounting.SharedQuery), so 8 members at once ask about as often as
    one member alone (the release before asked 16 times against 2)."""
    require_cluster()
    alone, together = _sacct_calls(home, tmp_path, 1), _sacct_calls(home, tmp_path, 8)
    # 8 members stay queued longer than one under load, so their sweep spans more intervals (7 calls against 2 in
    # one CI run, 2026-11-28): the bound allows that and still fails the per-member following (16 against 2)
    assert together <= 4 * alone + 2, (alone, together)
