"""The local launcher with real rank processes: DDP over gloo, fail-fast, cancel, ports, records."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import mltrain_exe, only_run, pid_alive, run_mltrain, runs

SEED_001_ARGS = "job.arguments=[--dist-backend,gloo,--dist-url,$AZ_BATCHAI_PYTORCH_INIT_METHOD,--rank,$AZ_BATCHAI_TASK_INDEX,--world-size,2]"
DDP = ["job=script", "job.script=allreduce.py", "distribution=pytorch", "distribution.process_count_per_node=2",
       "distribution.backend=gloo", SEED_001_ARGS]


@pytest.mark.slow
def test_two_rank_gloo_allreduce_without_multirun_flag(home, project):
    r = run_mltrain(*DDP, cwd=project)
    assert r.rc == 0, r.err
    run = only_run(home)
    assert run["status"] == "Completed"
    assert run["world"]["world_size"] == 2
    assert {k: v["exit_code"] for k, v in run["ranks"].items()} == {"0": 0, "1": 0}
    logs = Path(run["dir"]) / "logs"
    for rank in (0, 1):
        assert f"allreduce rank={rank} world=2 sum=3" in (logs / f"rank_{rank}.log").read_text()
    # rank 0 on the console as is, rank 1 only in its log (run.console=rank0, the default)
    assert "allreduce rank=0 world=2 sum=3" in r.out
    assert "rank=1" not in r.out
    assert "Completed" in r.out and run["dir"] in r.out
    assert (logs / "launcher.log").is_file()
    # phases are recorded in order: where the time went
    phases = run["phases"]
    assert phases["Queued"] <= phases["Preparing"] <= phases["Running"] <= phases["Finalizing"] <= phases["Completed"]


@pytest.mark.slow
def test_console_all_prefixes_other_ranks(home, project):
    r = run_mltrain(*DDP, "run.console=all", cwd=project)
    assert r.rc == 0, r.err
    assert "[rank 1] allreduce rank=1" in r.out
    assert "\nallreduce rank=0" in r.out


def test_rank_contract_and_argument_expansion(home, project):
    r = run_mltrain(
        "job=script", "job.script=show_env.py", "distribution=pytorch", "distribution.process_count_per_node=2",
        "job.arguments=[--rank,$AZ_BATCHAI_TASK_INDEX,--local,${oc.env:NOT_SET_XYZ,$LOCAL_RANK},plain,3]",
        "+job.params.alpha=0.5", "run.console=all", cwd=project,
    )
    assert r.rc == 0, r.err
    run = only_run(home)
    seen = {}
    for rank in (0, 1):
        line = next(l for l in (Path(run["dir"]) / "logs" / f"rank_{rank}.log").read_text().splitlines() if l.startswith("ENV "))
        seen[rank] = json.loads(line[4:])
    for rank, info in seen.items():
        env = info["env"]
        assert info["argv"] == ["--rank", str(rank), "--local", str(rank), "plain", "3"]
        assert env["RANK"] == env["AZ_BATCHAI_TASK_INDEX"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2" and env["NODE_RANK"] == "0"
        assert env["AZ_BATCH_MASTER_NODE"] == f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
        assert env["AZ_BATCHAI_PYTORCH_INIT_METHOD"] == f"tcp://{env['MASTER_ADDR']}:{env['MASTER_PORT']}"
        assert env["AML_PARAMETER_alpha"] == "0.5"
        assert env["MLTRAIN_RUN_ID"] == run["id"] and env["MLTRAIN_RUN_DIR"] == run["dir"]
        assert env["MLTRAIN_OUTPUTS_DIR"] == os.path.join(run["dir"], "outputs")
        assert info["cwd"] == os.path.join(run["dir"], "snapshot")  # the job runs from its snapshot
    assert seen[0]["env"]["MASTER_PORT"] == seen[1]["env"]["MASTER_PORT"] != "0"


def test_compute_gpus_caps_what_the_ranks_see(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "compute.gpus=0", "--dry-run", cwd=project)
    assert r.rc == 0 and "CUDA_VISIBLE_DEVICES=\n" in r.out + "\n"


def test_failing_rank_ends_the_run_fast(home, project):
    # rank 0 would sleep 600 s: were it left running, the 120 s deadline of run_mltrain fails the test
    r = run_mltrain("job=script", "job.script=fail_rank.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "+job.params.unused=1", cwd=project,
                    env={"FAIL_RANK": "1", "FAIL_CODE": "3", "FAIL_AFTER": "1", "SLEEP": "600"}, timeout=120)
    assert r.rc != 0
    assert "rank 1 exited with code 3" in r.out + r.err
    assert "rank 1 failing on purpose" in r.out + r.err  # the tail of rank 1's log
    run = only_run(home)
    assert run["status"] == "Failed" and run["failed_rank"] == 1
    assert "rank 1 exited with code 3" in run["error"]
    assert run["ranks"]["1"]["exit_code"] == 3
    assert run["ranks"]["0"]["stopped_by_mltrain"] is True
    assert not pid_alive(run["ranks"]["0"]["pid"])


def _start_driver(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(mltrain_exe() + list(args), cwd=project, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _wait_ranks_started(home: Path, count: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = runs(home)
        if found and found[0]["status"] == "Running" and len(found[0]["ranks"]) == count:
            logs = Path(found[0]["dir"]) / "logs"
            if all("sleeping" in (logs / f"rank_{i}.log").read_text() for i in range(count)
                   if (logs / f"rank_{i}.log").exists()):
                return found[0]
        time.sleep(0.1)
    raise AssertionError("ranks did not start")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signal_on_driver_cancels_every_rank(home, project, sig):
    driver = _start_driver(project, "job=script", "job.script=sleeper.py", "distribution=pytorch",
                           "distribution.process_count_per_node=2")
    try:
        run = _wait_ranks_started(home, 2)
        pids = [run["ranks"][str(i)]["pid"] for i in range(2)]
        driver.send_signal(sig)
        out, err = driver.communicate(timeout=30)
    finally:
        driver.kill()
    assert driver.returncode == 130
    record = only_run(home)
    assert record["status"] == "Canceled"
    assert not any(pid_alive(p) for p in pids), "a rank outlived the cancel"


@pytest.mark.slow
def test_concurrent_runs_get_distinct_ports(home, project):
    drivers = [_start_driver(project, *DDP) for _ in range(2)]
    outs = [d.communicate(timeout=180) for d in drivers]
    assert [d.returncode for d in drivers] == [0, 0], outs
    found = runs(home)
    assert len(found) == 2 and all(r["status"] == "Completed" for r in found)
    ports = {r["world"]["master_port"] for r in found}
    assert len(ports) == 2


def test_sweep_continues_past_a_failed_member(home, project):
    # member 0: rank 0 fails at once; member 1: no rank fails (rank 9 does not exist), all finish
    r = run_mltrain("-m", "job=script", "job.script=fail_rank.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "+job.params.FAIL_RANK=0,9", "+job.params.SLEEP=0",
                    "+job.params.FAIL_AFTER=0", cwd=project, timeout=120)
    assert r.rc == 1
    found = runs(home)
    assert [x["status"] for x in found] == ["Failed", "Completed"]
    assert "sweep of 2 runs" in r.out
    assert "Failed" in r.out and "Completed" in r.out


def test_sweep_members_each_get_a_run_directory(home, project):
    r = run_mltrain("-m", "job=script", "job.script=show_env.py", "+job.params.x=1,2,3", cwd=project)
    assert r.rc == 0, r.err
    found = runs(home)
    assert len(found) == 3 and len({x["dir"] for x in found}) == 3
    assert sorted(x["overrides"][-1] for x in found) == ["+job.params.x=1", "+job.params.x=2", "+job.params.x=3"]
    assert all(x["status"] == "Completed" for x in found)
    summary = json.loads((Path(found[0]["sweep"]["dir"]) / "summary.json").read_text())
    assert [row["status"] for row in summary] == ["Completed"] * 3


def test_members_reading_hydra_values_each_see_their_own(home, project):
    # Members of a value sweep are copies of one composed config: each must still resolve ${hydra:...}
    # against itself, never against the member frozen before it.
    r = run_mltrain("-m", "job=command", "job.command=echo member ${hydra:job.num} x ${job.params.x}",
                    "+job.params.x=5,7", "experiment_name=m${hydra:job.num}", cwd=project)
    assert r.rc == 0, r.out + r.err
    assert "[#0] member 0 x 5" in r.out and "[#1] member 1 x 7" in r.out
    assert sorted(x["id"].split("_")[0] for x in runs(home)) == ["m0", "m1"]


def test_command_job_runs_in_every_rank(home, project):
    r = run_mltrain("job=command", "job.command=echo hello from $RANK of $WORLD_SIZE", "distribution=pytorch",
                    "distribution.process_count_per_node=2", cwd=project)
    assert r.rc == 0, r.err
    run = only_run(home)
    logs = Path(run["dir"]) / "logs"
    assert "hello from 0 of 2" in (logs / "rank_0.log").read_text()
    assert "hello from 1 of 2" in (logs / "rank_1.log").read_text()


def test_frozen_config_is_written_once_and_resolved(home, project):
    r = run_mltrain("job=script", "job.script=show_env.py", "experiment_name=frozen-${now:%H%M%S}", cwd=project)
    assert r.rc == 0, r.err
    run = only_run(home)
    text = (Path(run["dir"]) / "config.yaml").read_text()
    assert "${" not in text  # nothing left to re-resolve in a rank or a requeue
    assert run["id"].startswith("frozen-")


def test_concurrent_members_print_whole_lines_each_with_its_prefix(home, project):
    (project / "chatty.py").write_text(
        "import os, sys, time\n"
        "me = os.environ['AML_PARAMETER_who']\n"
        "for i in range(40):\n"
        "    sys.stdout.write(f'line {i} of {me} '); sys.stdout.flush(); time.sleep(0.002)\n"
        "    sys.stdout.write('end\\n'); sys.stdout.flush()\n")
    r = run_mltrain("-m", "job=script", "job.script=chatty.py", "+job.params.who=aaa,bbb",
                    "compute.max_concurrent_jobs=2", cwd=project, timeout=120)
    assert r.rc == 0, r.err
    lines = [l for l in r.out.splitlines() if "line " in l]
    assert len(lines) == 80
    for line in lines:  # never two members in one line, never a line without its member
        assert line.startswith(("[#0] line ", "[#1] line ")) and line.endswith(" end"), line
        assert ("aaa" in line) != ("bbb" in line) and (("aaa" in line) == line.startswith("[#0]"))
    assert "mltrain: [#0] Queued" in r.out and "mltrain: [#1] Running" in r.out


def test_run_root_inside_the_source_folder_is_never_snapshotted(home, project):
    for _ in range(2):
        r = run_mltrain("job=script", "job.script=show_env.py", f"run.root={project}/runs", cwd=project)
        assert r.rc == 0, r.err
    runs = [p for p in (project / "runs").iterdir() if (p / "run.json").is_file()]  # not the index's folder
    second = sorted(runs, key=lambda p: p.stat().st_mtime)[-1]
    snapshot = second / "snapshot"
    assert (snapshot / "show_env.py").is_file() and not (snapshot / "runs").exists()


@pytest.mark.slow
def test_runs_show_tells_metrics_outputs_and_overrides(home, project):
    r = run_mltrain("job=script", "job.script=train_like_azure.py", "job.arguments=[--lr,0.1]", cwd=project)
    assert r.rc == 0, r.err
    run = only_run(home)
    shown = run_mltrain("runs", "show", run["id"], cwd=project)
    assert shown.rc == 0
    assert "overrides: job=script job.script=train_like_azure.py job.arguments=[--lr,0.1]" in shown.out
    assert "  loss: 0.5, 0.5, 1 over 2" in shown.out  # last, lowest, highest
    assert "outputs:   1 file(s)" in shown.out and "model.pt" in shown.out
