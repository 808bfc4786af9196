"""The runs index's rule: a row is used only while its run.json has the key the row was read with,
whichever writer's note landed last (mltrain.runs.index)."""
from __future__ import annotations

import json
from pathlib import Path

from mltrain.base.atomic import atomic_write
from mltrain.jobspec.records import RunDoc
from mltrain.runs import index


def doc(run_id: str, status: str, created: float) -> RunDoc:
    return RunDoc.from_json({"id": run_id, "status": status, "phases": {"NotStarted": created},
                             "world": {"node_count": 1, "process_count_per_node": 1, "world_size": 1}})


def write(run_dir: Path, d: RunDoc):
    run_dir.mkdir(exist_ok=True)
    return atomic_write(run_dir / "run.json", json.dumps(d.to_json()))


def test_a_note_that_lands_after_a_newer_write_is_not_believed(tmp_path):
    run = tmp_path / "r1"
    older, newer = doc("r1", "Running", 1.0), doc("r1", "Completed", 1.0)
    st_older = write(run, older)
    st_newer = write(run, newer)
    index.note(run, newer, st_newer)
    index.note(run, older, st_older)  # the slower writer's note lands last
    assert [r.status for r in index.newest(tmp_path, 10)] == ["Completed"]
    assert [r.status for r in index.scan(tmp_path)] == ["Completed"]


def test_newest_checks_what_it_returns_and_sees_folders_come_and_go(tmp_path):
    for i in range(5):
        d = doc(f"r{i}", "Completed", float(i))
        index.note(tmp_path / f"r{i}", d, write(tmp_path / f"r{i}", d))
    assert [r.folder for r in index.newest(tmp_path, 2)] == ["r4", "r3"]
    (tmp_path / "r4" / "run.json").write_text("{")  # damaged by hand
    unreadable: list = []
    assert [r.folder for r in index.newest(tmp_path, 2, unreadable)] == ["r3", "r2"] and unreadable == [tmp_path / "r4"]
    (tmp_path / "r4" / "run.json").unlink()
    (tmp_path / "r4").rmdir()
    copy = tmp_path / "r9"
    write(copy, doc("r9", "Failed", 9.0))  # by hand: no note
    assert [(r.folder, r.status) for r in index.newest(tmp_path, 2)] == [("r9", "Failed"), ("r3", "Completed")]
