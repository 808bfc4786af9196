"""A run started again in its folder (runs resume, a Slurm requeue) does not double its metrics (issue 63, chaos
seed 7): the latest attempt's value of a step replaces an earlier attempt's; steps only an earlier attempt reached
are kept."""
from __future__ import annotations

import json

from mltrain.runs.metrics import MetricsWriter, read_metrics, summarize


def _attempt(run_dir, resumes: int, monkeypatch, requeues: int = 0) -> MetricsWriter:
    (run_dir / "run.json").write_text(json.dumps({"attempts": [{}] * resumes}))
    monkeypatch.setenv("SLURM_RESTART_COUNT", str(requeues))
    return MetricsWriter(run_dir / "metrics.jsonl", rank=0)


def test_a_resumed_run_that_starts_over_logs_each_step_once(tmp_path, monkeypatch):
    first = _attempt(tmp_path, 0, monkeypatch)
    for step in (1, 2):
        first.log("score", step, step=step)  # killed here
    again = _attempt(tmp_path, 1, monkeypatch)
    for step in (1, 2, 3, 4):
        again.log("score", 10 + step, step=step)
    values = [(r["step"], r["value"]) for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert values == [(1, 11), (2, 12), (3, 13), (4, 14)]
    assert summarize(read_metrics(tmp_path / "metrics.jsonl"))["score"] == [11, 12, 13, 14]
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 6  # the file keeps every line


def test_a_run_that_goes_on_from_its_checkpoint_keeps_the_earlier_steps(tmp_path, monkeypatch):
    first = _attempt(tmp_path, 0, monkeypatch)
    for epoch in (1, 2, 3):
        first.log("loss", 1 / epoch, step=epoch)
    requeued = _attempt(tmp_path, 0, monkeypatch, requeues=1)  # a Slurm requeue: the same run, SLURM_RESTART_COUNT=1
    for epoch in (3, 4):  # epoch 3 was under way: run again from the checkpoint of epoch 2
        requeued.log("loss", 0.1 * epoch, step=epoch)
    steps = [(r["step"], r["value"]) for r in read_metrics(tmp_path / "metrics.jsonl")]
    assert steps == [(1, 1.0), (2, 0.5), (3, 0.30000000000000004), (4, 0.4)]


def test_a_first_attempt_writes_no_attempt_field(tmp_path, monkeypatch):
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    MetricsWriter(tmp_path / "metrics.jsonl", rank=0).log("x", 1, step=1)
    assert "attempt" not in json.loads((tmp_path / "metrics.jsonl").read_text())
