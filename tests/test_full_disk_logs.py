"""A full disk while a rank writes its log (issue: a 3 MB `run.root`): the run ends Failed in seconds,
mltrain's own threads do not die with tracebacks, the rank never blocks on a pipe nobody empties, and
the script's own error reaches the console and the run's error. A real tmpfs, real ranks."""
from __future__ import annotations

import json
import time

import pytest
from support import run_mltrain, tmpfs

CHATTY = """\
import sys
for i in range({lines}):
    print(f"line {{i}} " + "x" * 60)
sys.stdout.flush()
raise ValueError("the script's own error, after {lines} lines")
"""


@pytest.fixture
def tiny_disk(tmp_path):
    """A 3 MiB tmpfs for run.root, unmounted whatever happens."""
    with tmpfs(tmp_path / "tiny", "3m") as mount:
        yield mount


@pytest.mark.parametrize("lines", [40_000, 400_000])
def test_a_rank_log_on_a_full_disk_fails_in_seconds_with_the_scripts_own_error(home, project, tiny_disk, lines):
    (project / "chatty.py").write_text(CHATTY.format(lines=lines))
    started = time.monotonic()
    r = run_mltrain("job=script", "job.script=chatty.py", f"job.source_directory={project}", "run.id=full",
                    f"run.root={tiny_disk}", cwd=project, timeout=120)
    took = time.monotonic() - started
    assert r.rc == 1, r.out[-2000:] + r.err[-2000:]
    assert "Exception in thread" not in r.err and "Traceback (most recent call last)" not in r.err, r.err[-3000:]
    own = f"ValueError: the script's own error, after {lines} lines"
    assert own in r.out  # the console got the script's output to its end
    record = json.loads((tiny_disk / "full" / "run.json").read_text())
    assert record["status"] == "Failed"
    assert "rank 0 exited with code 1; its log" in record["error"] and "No space left on device" in record["error"]
    assert own in record["error"]  # the last lines, kept in memory
    assert took < 60, took
    print(f"\n{lines} lines into a 3 MB run.root: Failed in {took:.1f}s; {record['error'].splitlines()[0]}")
