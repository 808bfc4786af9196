"""A hung run found and explained (issue 49): no rank makes progress for run.hang_timeout_min, every rank's stack
is taken (py-spy), and the run ends Failed naming the rank that was not where the others were."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from mpi_support import require_mpi
from slurm_support import nodes_ready, require_cluster, wait_until
from support import only_run, require, run_mltrain

#: Rank 1 stops before the all-reduce its peer waits in.
HANG = """\
import os, signal, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
print("rank", dist.get_rank(), "ready", flush=True)
if dist.get_rank() == 1:
    time.sleep(600)
t = torch.ones(1)
dist.all_reduce(t)
"""

TWO_RANKS = ["distribution=pytorch", "distribution.process_count_per_node=2", "distribution.backend=gloo",
             "run.kill_grace_s=1"]
QUICK = "run.hang_timeout_min=0.05"  # three seconds without progress


def test_a_rank_stopped_before_an_all_reduce_is_named_with_its_line(home, project):
    (project / "hang.py").write_text(HANG)
    t0 = time.monotonic()
    # nine seconds: importing torch is silent too, and takes seconds on a busy 2-core machine
    r = run_mltrain("job=script", "job.script=hang.py", *TWO_RANKS, "run.hang_timeout_min=0.15", cwd=project,
                    timeout=120)
    took = time.monotonic() - t0
    assert r.rc != 0
    assert took < 45, took  # nine seconds of silence, the stacks, the stop: not the 600 s sleep
    run = only_run(home)
    assert run["status"] == "Failed"
    error = run["error"]
    assert error.startswith("hung: no progress for 0.15 min; "), error
    assert re.search(r"rank 1 on \S+: hang\.py:5 in <module>", error), error
    assert re.search(r"rank 0 waits in all_reduce \(hang\.py:7 in <module>\)", error), error
    stacks = (Path(run["dir"]) / "logs" / "stacks.txt").read_text()
    assert "=== rank 0 on" in stacks and "=== rank 1 on" in stacks and "all_reduce" in stacks
    assert "hung: no progress" in r.out + r.err


SILENT_BUT_ALIVE = """\
import time
from mltrain import run
for i in range(5):
    time.sleep(1)
    run.heartbeat()  # no output, no metric: only the heartbeat says it is alive
"""

TALKING = """\
import time
for i in range(5):
    time.sleep(1)
    print("step", i, flush=True)
"""


def test_output_and_heartbeats_are_progress(home, project):
    (project / "alive.py").write_text(SILENT_BUT_ALIVE)
    (project / "talking.py").write_text(TALKING)
    for script in ("alive.py", "talking.py"):
        r = run_mltrain("job=script", f"job.script={script}", QUICK, cwd=project)
        assert r.rc == 0, r.out + r.err


IGNORES_SIGNALS = """\
import signal, threading
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print("waiting forever", flush=True)
threading.Event().wait()  # a wait in native code that no signal ends
"""


def test_a_rank_that_ignores_signals_still_has_its_stack_taken_and_is_stopped(home, project):
    (project / "stuck.py").write_text(IGNORES_SIGNALS)
    r = run_mltrain("job=script", "job.script=stuck.py", QUICK, "run.kill_grace_s=1", cwd=project, timeout=120)
    assert r.rc != 0
    run = only_run(home)
    assert run["status"] == "Failed" and re.search(r"stuck\.py:4 in <module>", run["error"]), run["error"]


def test_without_py_spy_the_run_still_ends_saying_why_there_are_no_stacks(home, project):
    (project / "stuck.py").write_text(IGNORES_SIGNALS)
    r = run_mltrain("job=script", "job.script=stuck.py", QUICK, "run.kill_grace_s=1", cwd=project, timeout=120,
                    env={"MLTRAIN_PY_SPY": "/nonexistent/py-spy"})
    assert r.rc != 0
    error = only_run(home)["error"]
    assert "the stacks could not be taken (py-spy is not installed (pip install py-spy))" in error, error


def test_a_hung_rank_on_the_two_node_cluster_is_named_with_its_node_and_line(home, project):
    """The same hang with one rank per node of the two-node Slurm cluster: each node's task takes its own rank's
    stack, rank 0's gathers them, and the job ends Failed with the one line naming rank 1, its node and line."""
    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    require_cluster()
    wait_until(lambda: nodes_ready(conf), 60, "both nodes ready before the test")
    (project / "hang.py").write_text(HANG)
    r = run_mltrain("job=script", "job.script=hang.py", "compute=slurm", "distribution=pytorch",
                    "distribution.node_count=2", "distribution.backend=gloo", "run.hang_timeout_min=0.2", cwd=project,
                    timeout=240, env={"SLURM_CONF": conf})
    assert r.rc != 0
    run = only_run(home)
    error = run["error"]
    assert run["status"] == "Failed" and error.startswith("hung: no progress for 0.2 min; "), error
    assert re.search(r"rank 1 on n\d: hang\.py:5 in <module>; rank 0 waits in all_reduce \(hang\.py:7", error), error
    stacks = (Path(run["dir"]) / "logs" / "stacks.txt").read_text()
    assert re.search(r"=== rank 0 on n\d ===", stacks) and re.search(r"=== rank 1 on n\d ===", stacks), stacks
    wait_until(lambda: nodes_ready(conf), 60, "both nodes idle")


STALLS_ONCE = """\
import os, time
attempt = int(os.environ.get("MLTRAIN_ATTEMPT", "0"))
print("attempt", attempt, "started", flush=True)
if attempt == 0:
    time.sleep(600)  # the first attempt hangs; a checkpointing script would go on from its last checkpoint
print("attempt", attempt, "done", flush=True)
"""


def test_a_hung_slurm_job_is_requeued_when_asked_and_completes(home, project):
    require_cluster()
    (project / "stalls.py").write_text(STALLS_ONCE)
    r = run_mltrain("job=script", "job.script=stalls.py", "compute=slurm", "run.hang_timeout_min=0.1",
                    "run.hang_action=requeue", cwd=project, timeout=240)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    assert run["status"] == "Completed" and "attempt 1 done" in log and "attempt 0 done" not in log, log
    assert re.search(r"hung: no progress for 0\.1 min; rank 0 on \S+: stalls\.py:5 in <module>.*requeued", log), log


def test_requeue_after_a_hang_needs_a_cluster(home, project):
    r = run_mltrain("job=command", "job.command=true", "job.source_directory=.", "run.hang_action=requeue", cwd=project)
    assert r.rc != 0 and r.err.startswith("mltrain: error: run.hang_action: requeue runs a hung job again"), r.err


def test_a_hung_rank_under_mpirun_is_named_with_its_line(home, project):
    require_mpi()
    (project / "hang.py").write_text(HANG)
    r = run_mltrain("job=script", "job.script=hang.py", "distribution=mpi", "distribution.process_count_per_node=2",
                    "distribution.oversubscribe=true", "run.hang_timeout_min=0.15", cwd=project, timeout=120)
    assert r.rc != 0
    error = only_run(home)["error"]
    assert re.search(r"^hung: no progress for 0\.15 min; rank 1 on \S+: hang\.py:5 in <module>; rank 0 waits in "
                     r"all_reduce \(hang\.py:7 in <module>\)", error), error
