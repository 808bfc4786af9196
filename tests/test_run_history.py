"""runs plot, runs compare and runs rerun (issue 12, part 4), on real runs."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from support import metric_rows, run_mltrain, runs


def png_size(path: Path) -> tuple:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_rerun_runs_the_recorded_snapshot_not_todays_source(home, project, tmp_path):
    first = run_mltrain("job=script", "job.script=rerun_me.py", "run.id=orig", cwd=project)
    assert first.rc == 0, first.err
    script = project / "rerun_me.py"
    script.write_text(script.read_text().replace("VALUE = 1.5", "VALUE = 2.5"))
    again = run_mltrain("runs", "rerun", "orig", cwd=project)
    assert again.rc == 0, again.out + again.err
    new = runs(home)[-1]
    assert new["id"] != "orig" and new["reproduces"] == "orig" and new["status"] == "Completed"
    # what the script logged; the system/ samples measure the machine, as a clock does
    values = lambda d: [(r["name"], r["step"], r["value"]) for r in metric_rows(d) if not r["name"].startswith("system/")]  # noqa: E731
    assert values(new["dir"]) == values(home / "runs" / "orig")
    assert "value 1.5" in (Path(new["dir"]) / "logs" / "rank_0.log").read_text()

    # compare: the runs differ in nothing they were configured with; a third run differs in its script
    third = run_mltrain("job=script", "job.script=rerun_me.py", "run.id=edited", cwd=project)
    assert third.rc == 0
    table = json.loads(run_mltrain("runs", "compare", "orig", new["id"], "edited", "--json", cwd=project).out)
    assert table["params"] == {}  # the script's content is not config: the snapshot says it
    assert [v["last"] for v in table["metrics"]["value"]] == [4.5, 4.5, 7.5]
    text = run_mltrain("runs", "compare", "orig", "edited", cwd=project).out
    assert "value last" in text and "4.5" in text and "7.5" in text

    # plot: one panel per metric, a line per run, a real PNG
    out = tmp_path / "curves.png"
    r = run_mltrain("runs", "plot", "orig", "edited", "-o", str(out), cwd=project)
    assert r.rc == 0 and "draw, value of 2 run(s)" in r.out, r.out + r.err
    width, height = png_size(out)
    assert width >= 600 and height >= 300
    from mltrain.python_api.history import curves
    from mltrain.runs.record import RunRecord

    assert curves(RunRecord.load(home / "runs" / "edited"), "value") == {"value": [(1, 2.5), (2, 5.0), (3, 7.5)]}
    r = run_mltrain("runs", "plot", "orig", "--metric", "nosuch", "-o", str(out), cwd=project)
    assert r.rc == 2 and r.err.strip() == "mltrain: error: no metric 'nosuch' in run(s) orig (see `mltrain runs show`)"


def test_compare_names_the_differing_parameters(home, project):
    for lr in ("0.1", "0.2"):
        assert run_mltrain("job=script", "job.script=rerun_me.py", f"+job.params.lr={lr}", f"run.id=lr{lr}",
                           cwd=project).rc == 0
    table = json.loads(run_mltrain("runs", "compare", "lr0.1", "lr0.2", "--json", cwd=project).out)
    assert table["params"] == {"job.params.lr": [0.1, 0.2]}


@pytest.mark.slow
def test_trainer_rerun_reproduces_its_metrics_exactly_on_the_cpu(home, project):
    args = ["trainer.epochs=2", "data.image_size=16", "trainer.batch_size=64", "run.id=t1"]
    assert run_mltrain(*args, cwd=project, timeout=300).rc == 0
    r = run_mltrain("runs", "rerun", "t1", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    new = runs(home)[-1]

    def learned(run_dir):  # everything but the clock and the machine's system/ samples
        return [(m["name"], m["step"], m["value"]) for m in metric_rows(run_dir)
                if "per_second" not in m["name"] and not m["name"].startswith("system/")]

    assert learned(new["dir"]) == learned(home / "runs" / "t1") and len(learned(new["dir"])) >= 10
