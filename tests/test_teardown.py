"""A rank whose script has finished never dies in the interpreter's native teardown; a real failure still
fails the run with its own exit code. Real 2-rank gloo jobs, locally and on the test Slurm cluster.

The abort is made certain rather than waited for: tests/scripts/teardown_abort.py registers abort() with
glibc's on_exit(), which fires where a C++ static destructor's std::terminate does (at exit(), after
Python has finished). The real, occasional abort of a correct gloo DDP script is counted over 100 runs by
benchmarks/bench_teardown.py (figures in the README).
"""
from __future__ import annotations

import pytest
from slurm_support import require_cluster
from support import only_run, run_mltrain

pytestmark = pytest.mark.slow

DDP = ["distribution=pytorch", "distribution.process_count_per_node=2"]


def _ranks_wrote(record: dict) -> list:
    """What each rank wrote to ./outputs (kept in the run folder), by rank."""
    from pathlib import Path

    found = {p.name: p.read_text() for p in Path(record["dir"]).rglob("outputs/rank*.txt")}
    return [found[name] for name in sorted(found)]


@pytest.mark.parametrize("kind", ["script", "command"])
def test_a_rank_that_aborts_in_native_teardown_after_its_script_finished_completes(home, project, kind):
    job = (["job=script", "job.script=teardown_abort.py"] if kind == "script"
           else ["job=command", "job.command=python teardown_abort.py"])
    r = run_mltrain(*job, *DDP, cwd=project, timeout=240)
    record = only_run(home)
    assert r.rc == 0 and record["status"] == "Completed", (r.err[-2000:], record.get("error"))
    assert _ranks_wrote(record) == ["2", "2"]
    assert "terminate" not in r.out + r.err and "Aborted" not in r.out + r.err


@pytest.mark.parametrize("then, message", [
    ("3", "rank 0 exited with code 3"),
    ("raise", "rank 0 exited with code 1"),
    ("kill", "rank 0 was killed by SIGKILL"),
])
def test_a_real_failure_still_fails_the_run_with_its_own_exit_code(home, project, then, message):
    r = run_mltrain("job=script", "job.script=teardown_abort.py", "job.arguments=[--then," + then + "]", *DDP,
                    cwd=project, timeout=240)
    record = only_run(home)
    assert r.rc != 0 and record["status"] == "Failed", record
    # either rank may be the first to fail; the message names its own exit
    assert message.replace("rank 0", "rank ") in record["error"].replace("rank 0", "rank ").replace("rank 1", "rank "), \
        record["error"]
    if then == "raise":  # the traceback starts at the user's script, as `python teardown_abort.py` prints it
        from pathlib import Path

        text = "".join(p.read_text() for p in Path(record["dir"]).rglob("*.log")) + r.out + r.err
        assert "RuntimeError: a real failure after the work" in text
        assert 'script_main.py", line' not in text and 'teardown_abort.py", line' in text


def test_a_finished_rank_never_aborts_on_slurm_either(home, project):
    require_cluster()
    r = run_mltrain("job=script", "job.script=teardown_abort.py", "compute=slurm", *DDP, cwd=project, timeout=240)
    record = only_run(home)
    assert r.rc == 0 and record["status"] == "Completed", (r.err[-2000:], record.get("error"))
    assert _ranks_wrote(record) == ["2", "2"]
