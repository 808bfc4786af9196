"""The typed, in-process job API (mltrain.python_api.api.submit_request): the run exists when submit returns, a
mistake is one MltrainError raised in the caller, the run's driver outlives the caller, and a cancel sent
the instant after submit is the run's cancel (Canceled, never 'driver lost'), whether the driver is a
fork of a single-threaded caller or a new interpreter (a caller with threads, as a notebook kernel)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest


def _script(project, body: str) -> subprocess.CompletedProcess:
    (project / "caller.py").write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, "caller.py"], cwd=project, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("threads", [False, True], ids=["forked driver", "spawned driver"])
def test_a_cancel_right_after_submit_is_the_runs_cancel(home, project, threads):
    out = _script(project, f"""\
        import threading, time
        from mltrain.python_api.api import Request, submit_request
        if {threads}:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        run = submit_request(Request(job="command", overrides=("job.command=sleep 30",)))
        run.cancel()
        print("FINAL", run.wait(raise_on_error=False, timeout=60), run.run_dir)
        """)
    assert out.returncode == 0, out.stderr[-2000:]
    status, run_dir = out.stdout.split("FINAL ", 1)[1].split()[:2]
    record = json.loads(open(f"{run_dir}/run.json").read())
    assert status == "Canceled" and record["status"] == "Canceled", record.get("error")
    assert "canceled by the user" in record["error"]


def test_the_run_outlives_the_script_that_submitted_it(home, project):
    out = _script(project, """\
        from mltrain.python_api.api import Request, submit_request
        run = submit_request(Request(job="command", overrides=("job.command='sleep 2; echo done'",)))
        print("RUN", run.run_dir)
        """)  # the script ends at once, its run goes on
    assert out.returncode == 0, out.stderr[-2000:]
    import mltrain

    run = mltrain.Run(out.stdout.split("RUN ", 1)[1].split()[0])
    assert run.wait(timeout=120) == "Completed"
    assert "done" in run.logs()


def test_a_bad_request_raises_one_line_in_the_caller_and_makes_no_run(home, project):
    from mltrain.base.errors import MltrainError
    from mltrain.python_api.api import Request, submit_request

    with pytest.raises(MltrainError) as err:
        submit_request(Request(job="script", overrides=("job.script=missing.py", f"job.source_directory={project}")))
    assert str(err.value) == f"job.script: file 'missing.py' does not exist in '{project}'"
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
