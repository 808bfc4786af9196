"""The runs index (<root>/.index/runs.sqlite) agrees with the run folders: after 20 runs finish at once,
after it is deleted, after a run folder is removed or copied in by hand, after a run.json is damaged."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

from support import mltrain_exe, run_mltrain

RACERS = 20


def index_rows(root: Path) -> dict:
    """{folder: (status, run.json key, unreadable)} as the index holds them."""
    with sqlite3.connect(root / ".index" / "runs.sqlite") as conn:
        return {f: (s, (i, m, z), u) for f, s, i, m, z, u in
                conn.execute("SELECT folder, status, ino, mtime_ns, size, unreadable FROM runs")}


def row_says(root: Path, folder: str, status: str) -> bool:
    try:
        return index_rows(root).get(folder, ("",))[0] == status
    except sqlite3.OperationalError:  # not made yet, or its table not yet
        return False


def folders(root: Path) -> dict:
    """{folder: (status, run.json key)} as the folders hold them."""
    out = {}
    for d in root.iterdir():
        if (d / "run.json").is_file():
            st = (d / "run.json").stat()
            out[d.name] = (json.loads((d / "run.json").read_text())["status"], (st.st_ino, st.st_mtime_ns, st.st_size))
    return out


def listed(project: Path) -> str:
    r = run_mltrain("runs", "list", "--limit", "1000", cwd=project)
    assert r.rc == 0 and "Traceback" not in r.err, r.err
    return r.out


def race(project: Path) -> None:
    drivers = [subprocess.Popen([*mltrain_exe(), "job=command", "job.command=true", f"run.id=race_{i:02d}"], cwd=project,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for i in range(RACERS)]
    errors = [d.communicate(timeout=600)[1] for d in drivers]
    assert [d.returncode for d in drivers] == [0] * RACERS, [e for e in errors if e.strip()][:3]


def test_twenty_runs_finishing_at_once_then_the_index_deleted_a_folder_removed_and_a_record_damaged(home, project):
    race(project)
    root = home / "runs"
    names = {f"race_{i:02d}" for i in range(RACERS)}
    # the writers alone (no reader has looked yet) left one row per run, with its final status
    rows = index_rows(root)
    assert set(rows) == names and {s for s, _, _ in rows.values()} == {"Completed"}
    first = listed(project)
    assert sum(f"race_{i:02d}" in first and "Completed" in first for i in range(RACERS)) == RACERS
    # after a look the index is the folders', key for key
    assert {f: (s, k) for f, (s, k, _) in index_rows(root).items()} == folders(root)

    # deleted: rebuilt from the folders by the next look, which shows the same
    shutil.rmtree(root / ".index")
    assert listed(project) == first
    assert {f: (s, k) for f, (s, k, _) in index_rows(root).items()} == folders(root)

    # a folder removed by hand leaves the list and the index; one copied in by hand joins both
    shutil.rmtree(root / "race_03")
    shutil.copytree(root / "race_04", root / "copied_by_hand")
    after = listed(project)
    assert "race_03" not in after and "race_03" not in index_rows(root)
    assert "copied_by_hand" in index_rows(root) and after.count("race_04") == 2  # the copy keeps its record's id

    # a run.json damaged by hand: listed as unreadable with its folder named; repaired, listed again
    damaged = root / "race_07" / "run.json"
    good = damaged.read_text()
    damaged.write_text(good[:60])
    out = listed(project)
    assert f"{root / 'race_07' / 'run.json'} cannot be read" in out and index_rows(root)["race_07"][2] == 1
    assert sum(f"race_{i:02d}" in out for i in range(RACERS) if i not in (3, 7)) == RACERS - 2
    shown = run_mltrain("runs", "show", "race_08", cwd=project)
    assert shown.rc == 0 and "status:    Completed" in shown.out, shown.err
    damaged.write_text(good)
    assert listed(project) == listed(project) and "cannot be read" not in listed(project)
    assert index_rows(root)["race_07"][0] == "Completed"


def test_a_run_that_has_not_ended_is_shown_as_its_backend_knows_it(home, project):
    """Only final rows are taken from the index: a run whose driver was killed is `Failed` at the next
    look, though its row last said `Running`."""
    driver = subprocess.Popen([*mltrain_exe(), "job=command", "job.command=sleep 60", "run.id=lost"], cwd=project,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        root = home / "runs"
        deadline = time.monotonic() + 120
        while not row_says(root, "lost", "Running"):
            assert driver.poll() is None and time.monotonic() < deadline, "the run never showed Running in the index"
            time.sleep(0.1)
        assert "Running" in listed(project)
    finally:
        os.killpg(driver.pid, 9)  # the driver and its rank: nobody is left to record the end
        driver.wait(timeout=30)
    out = listed(project)
    assert "lost" in out and "Failed" in out and "Running" not in out, out
    assert index_rows(root)["lost"][0] == "Failed"
