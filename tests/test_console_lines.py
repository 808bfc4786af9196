"""The console relays whole lines of each rank, never a part of one (issue 63: the docs' own example printed
`rank[rank 1] rank 1 sees GPUs 1` then ` 0 sees GPUs 0`). Real ranks that write each line in pieces, with the
other rank's whole line landing while the first is half written; a rank's last line without a line end."""
from __future__ import annotations

from pathlib import Path

from support import only_run, run_mltrain

#: Rank 0 writes a part of a line and waits until rank 1 has written a whole line (in pieces too) and the
#: driver has had time to show it; then both end on a line with no line end.
PIECES = """\
import os, sys, time
rank, sync = int(os.environ["RANK"]), sys.argv[1]

def piece(text, pause=0.0):
    sys.stdout.write(text)
    sys.stdout.flush()
    time.sleep(pause)

def wait_for(name):
    deadline = time.monotonic() + 30
    while not os.path.exists(os.path.join(sync, name)) and time.monotonic() < deadline:
        time.sleep(0.02)

if rank == 0:
    piece("rank ")
    open(os.path.join(sync, "zero-started"), "w").close()
    wait_for("one-done")
    time.sleep(0.3)
    piece("0 sees ", 0.2)
    piece("its line\\n")
else:
    wait_for("zero-started")
    piece("rank ", 0.2)
    piece("1 sees ", 0.2)
    piece("its line\\n")
    open(os.path.join(sync, "one-done"), "w").close()
piece(f"rank {rank} ends without a line end", 0.2)
"""


def _run(project: Path, tmp_path: Path, name: str, *extra: str):
    (project / "pieces.py").write_text(PIECES)
    sync = tmp_path / name
    sync.mkdir()
    return run_mltrain("job=script", f"job.source_directory={project}", "job.script=pieces.py",
                       f"job.arguments=[{sync}]", "distribution=pytorch", "distribution.process_count_per_node=2",
                       *extra, cwd=project)


def _rank_lines(out: str) -> list:
    # every console line that holds some of what the ranks wrote
    return [line for line in out.splitlines() if "sees" in line or "line end" in line or line.endswith("rank ")]


def test_every_rank_line_reaches_the_console_whole_and_once(home, project, tmp_path):
    r = _run(project, tmp_path, "all", "run.console=all")
    assert r.rc == 0, r.out + r.err
    assert sorted(_rank_lines(r.out)) == sorted([
        "[rank 1] rank 1 sees its line", "rank 0 sees its line",
        "[rank 1] rank 1 ends without a line end", "rank 0 ends without a line end"]), r.out
    lines = r.out.splitlines()
    assert lines.index("[rank 1] rank 1 sees its line") < lines.index("rank 0 sees its line")  # as they ended
    assert only_run(home)["status"] == "Completed"


def test_rank_0_alone_ends_its_last_line_before_the_status_lines(home, project, tmp_path):
    # rank 0 alone on the console passes through as written (a progress bar redraws); its last line, which
    # has no line end, still ends before mltrain's own lines start
    r = _run(project, tmp_path, "rank0")
    assert r.rc == 0, r.out + r.err
    assert _rank_lines(r.out) == ["rank 0 sees its line", "rank 0 ends without a line end"], r.out
