"""run.json of every layout mltrain has written reads into the typed record, and is written back whole.

Fixtures: tests/data/old_layout/*/run.json (0.1.0: `backend` names the process group, no `created`) and
tests/data/record_layouts/ (layout 2, made by the release before typed records: a run that failed and
was mirrored into MLflow, a pipeline's own run and one of its steps).
"""
import json
from pathlib import Path

import pytest

from mltrain import backends
from mltrain.base.errors import MltrainError
from mltrain.jobspec.records import RUN_LAYOUT, MlflowMark, PipelineGraph, RankEntry, RunDoc, StepEntry, World
from mltrain.jobspec.sweep_record import SWEEP_LAYOUT, MemberRow, SweepDoc
from mltrain.runs.record import RunRecord

DATA = Path(__file__).parent.parent / "data"
FIXTURES = sorted([*(DATA / "old_layout").glob("*/run.json"), *(DATA / "record_layouts").glob("layout2_*.json")])


def _raw(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_layout_reads_typed_and_round_trips(path):
    raw = _raw(path)
    doc = RunDoc.from_json(raw)
    assert isinstance(doc.world, World) and all(isinstance(e, RankEntry) for e in doc.ranks.values())
    assert doc.created == (raw.get("created") or min(raw["phases"].values()))
    again = RunDoc.from_json(json.loads(json.dumps(doc.to_json())))
    assert again == doc and again.layout == RUN_LAYOUT
    written = doc.to_json()
    for key, value in raw.items():  # nothing that was on disk is lost by reading and writing it
        if key not in ("created", "ranks", "world"):
            assert written[key] == value, key


def test_a_0_1_0_record_names_its_backend_by_compute_and_distribution():
    doc = RunDoc.from_json(_raw(DATA / "old_layout" / "oldlayout_run" / "run.json"))
    assert doc.backend == "gloo" and doc.created == min(doc.phases.values())
    record = RunRecord(Path("/nonexistent"), doc)
    assert backends.backend_of(record).name == "local"
    slurm = RunRecord(Path("/nonexistent"), RunDoc.from_json(_raw(DATA / "old_layout" / "oldlayout_slurm" / "run.json")))
    assert backends.backend_of(slurm).name == "slurm" and slurm.scheduler_job_id == "2"


def test_a_pipeline_record_reads_its_graph_typed():
    doc = RunDoc.from_json(_raw(DATA / "record_layouts" / "layout2_pipeline.json"))
    assert isinstance(doc.pipeline, PipelineGraph) and doc.pipeline.order == ["make", "use"]
    assert all(isinstance(s, StepEntry) for s in doc.pipeline.steps.values())
    assert doc.pipeline.steps["use"].parents == ["make"] and doc.pipeline.steps["use"].status == "Completed"
    step = RunDoc.from_json(_raw(DATA / "record_layouts" / "layout2_pipeline_step.json"))
    assert step.pipeline_step is not None and step.pipeline_step["step"] == "make"


def test_the_mirror_mark_is_typed():
    doc = RunDoc.from_json(_raw(DATA / "record_layouts" / "layout2_run.json"))
    assert isinstance(doc.mlflow, MlflowMark) and doc.mlflow.status == "Failed"


def test_keys_of_a_later_mltrain_are_kept():
    raw = _raw(DATA / "record_layouts" / "layout2_run.json") | {"from_the_future": {"a": 1}}
    assert RunDoc.from_json(raw).to_json()["from_the_future"] == {"a": 1}


def test_a_record_missing_its_status_is_refused_in_one_line(tmp_path):
    raw = _raw(DATA / "record_layouts" / "layout2_run.json")
    del raw["status"]
    (tmp_path / "run.json").write_text(json.dumps(raw))
    with pytest.raises(MltrainError) as err:
        RunRecord.load(tmp_path)
    assert "run.json: not a run record mltrain can read" in str(err.value) and "\n" not in str(err.value)


def test_truncated_json_is_refused_naming_the_file(tmp_path):
    (tmp_path / "run.json").write_text('{"id": "x", "sta')
    with pytest.raises(MltrainError, match="run.json is unreadable"):
        RunRecord.load(tmp_path)


def test_updates_take_only_fields_a_run_record_has(tmp_path):
    doc = RunDoc.from_json(_raw(DATA / "record_layouts" / "layout2_run.json"))
    record = RunRecord(tmp_path, doc)
    record.update(error="boom", detached=True)
    assert RunRecord.load(tmp_path).doc.error == "boom" and RunRecord.load(tmp_path).doc.detached
    with pytest.raises(AttributeError):
        record.update(no_such_field=1)
    record.set_rank(3, exit_code=0, host="n1")
    assert RunRecord.load(tmp_path).doc.ranks["3"] == RankEntry(exit_code=0, host="n1")


def test_a_sweep_record_of_the_first_layout_reads_typed_and_round_trips():
    raw = _raw(DATA / "record_layouts" / "layout1_sweep.json")
    doc = SweepDoc.from_json(raw)
    assert all(isinstance(m, MemberRow) for m in doc.members) and doc.best_run_id == doc.members[0].run_id
    assert doc.best_value == 6 and doc.members[0].values == [2, 4, 6] and doc.layout == SWEEP_LAYOUT
    written = doc.to_json()
    assert {k: v for k, v in written.items() if k not in ("layout", "members")} == {k: v for k, v in raw.items()
                                                                                   if k != "members"}
    # layout 3's member fields (for `runs resume SWEEP`) are added with their defaults
    assert [{k: v for k, v in m.items() if k not in ("trial", "judged")} for m in written["members"]] == raw["members"]
    assert all(m["trial"] is None and m["judged"] == 0 for m in written["members"])
    assert SweepDoc.from_json(written) == doc


def test_runs_best_summary_reads_the_typed_sweep():
    from mltrain.sweeps.results import summary_lines

    lines = summary_lines(SweepDoc.from_json(_raw(DATA / "record_layouts" / "layout1_sweep.json")))
    assert lines[0] == "sweep of 2 runs (grid, score maximize):" and lines[1].startswith(" *#0   Completed score=6")


def test_a_runs_config_reads_back_as_it_was_frozen(tmp_path):
    """config.yaml is written and read with libyaml where PyYAML has it (the MLflow mirror reads one per
    run): strings YAML could take for other types, and nesting, come back as they were frozen."""
    from .jobs import frozen_job

    config = {"job": {"kind": "script", "params": {"flag": "yes", "lr": "1e-3", "zip": "012", "none": "null",
                                                   "date": "2026-11-27", "n": 3, "x": 0.5, "on": True,
                                                   "text": "ção: 中文 #1", "list": [1, "2", None]}},
              "empty": {}, "nothing": None}
    record = RunRecord.create(frozen_job(run_dir=str(tmp_path / "r1"), config=config))
    assert RunRecord.load(record.dir).resolved_config() == config
    (record.dir / "config.yaml").unlink()  # a member that was never made has none
    assert record.resolved_config() == {}
