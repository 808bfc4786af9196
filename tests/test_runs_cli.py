"""`mltrain runs list|show|logs` read what the launcher recorded."""
from __future__ import annotations

from support import only_run, run_mltrain


def test_runs_list_show_logs(home, project):
    r = run_mltrain("job=script", "job.script=fail_rank.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "+job.params.FAIL_AFTER=0", cwd=project)
    assert r.rc == 1
    run = only_run(home)
    listed = run_mltrain("runs", "list", cwd=project)
    assert listed.rc == 0 and run["id"] in listed.out and "Failed" in listed.out
    shown = run_mltrain("runs", "show", run["id"][:-3], cwd=project)
    assert shown.rc == 0 and "status:    Failed" in shown.out and "rank 1:    exit code 3" in shown.out
    assert "overrides: job=script job.script=fail_rank.py" in shown.out
    assert "error:     rank 1 exited with code 3" in shown.out
    logs = run_mltrain("runs", "logs", run["id"], "--rank", "1", cwd=project)
    assert "rank 1 failing on purpose" in logs.out
    launcher = run_mltrain("runs", "logs", run["id"], "--launcher", cwd=project)
    assert "rank 1 exited with code 3" in launcher.out
    missing = run_mltrain("runs", "show", "nope", cwd=project)
    assert missing.rc != 0 and missing.err.count("\n") == 1 and "no run 'nope'" in missing.err
