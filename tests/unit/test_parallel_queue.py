"""A parallel job's queue (mltrain.parallel.work_queue) as its agents and workers use it (issue 66): the rows of
each mini-batch are a line of its worker's log, read on incrementally, a line its worker died writing is not done,
and an agent alone in its run keeps its claims in memory, never taking a mini-batch done before a resume."""
import json
import os

from mltrain.parallel import worker
from mltrain.parallel.work_queue import Queue


def _queue(tmp_path, batches: int, alone: bool = False) -> Queue:
    queue = Queue(tmp_path, agent="node:1:0", alone=alone)
    queue.publish([{"files": [f"f{i}"], "items": 1} for i in range(batches)])
    return queue


def test_a_workers_log_is_read_on_line_by_line_and_a_line_without_its_end_is_not_done(tmp_path, monkeypatch):
    queue = _queue(tmp_path, 4)
    monkeypatch.setattr(worker, "_log", None)
    worker.write_done(str(tmp_path), 0, ["a 1"], 1)
    assert queue.names("done") == [0] and queue.done(0) == {"items": 1, "rows": ["a 1"]}
    worker.write_done(str(tmp_path), 2, ["c 1"], 1)
    log = next((tmp_path / "done").glob("*.jsonl"))
    with open(log, "ab") as f:  # a worker killed as it wrote mini-batch 3
        f.write(b'{"index": 3, "items": 1, "ro')
    assert sorted(queue.names("done")) == [0, 2] and queue.unfinished() == [1, 3]
    with open(log, "ab") as f:  # had it finished the line after all, it would count
        f.write(b'ws": ["d 1"]}\n')
    assert sorted(queue.names("done")) == [0, 2, 3] and queue.done(3)["rows"] == ["d 1"]
    os.close(worker._log)


def test_a_mini_batch_two_agents_finished_keeps_the_first_line_read_and_older_files_still_count(tmp_path):
    queue = _queue(tmp_path, 3)
    (tmp_path / "done" / "a.1.1.jsonl").write_text(json.dumps({"index": 1, "items": 1, "rows": ["first"]}) + "\n")
    assert queue.done(1)["rows"] == ["first"]
    (tmp_path / "done" / "b.2.2.jsonl").write_text(json.dumps({"index": 1, "items": 1, "rows": ["again"]}) + "\n")
    (tmp_path / "done" / "0.json").write_text(json.dumps({"items": 1, "rows": ["old layout"]}))
    assert sorted(queue.names("done")) == [0, 1] and queue.done(1)["rows"] == ["first"]
    assert queue.done(0)["rows"] == ["old layout"]


def test_an_agent_alone_takes_each_mini_batch_once_in_order_and_a_released_one_first(tmp_path):
    queue = _queue(tmp_path, 4, alone=True)
    assert [queue.claim_next() for _ in range(3)] == [0, 1, 2]
    queue.release(1)  # its run() failed: it runs again before the next one
    assert [queue.claim_next(), queue.claim_next(), queue.claim_next()] == [1, 3, None]
    assert not list((tmp_path / "claims").iterdir())  # no file a mini-batch


def test_an_agent_alone_resumed_never_takes_a_mini_batch_done_before(tmp_path):
    first = _queue(tmp_path, 3, alone=True)
    (tmp_path / "done" / "w.1.1.jsonl").write_text(json.dumps({"index": 1, "items": 1, "rows": ["x"]}) + "\n")
    assert first.recover() == 1
    again = Queue(tmp_path, agent="node:2:0", alone=True)
    assert [again.claim_next(), again.claim_next(), again.claim_next()] == [0, 2, None]
