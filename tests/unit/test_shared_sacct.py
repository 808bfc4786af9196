"""accounting.SharedQuery: followers in one process share one sacct call per interval, on recorded sacct output
(the same text tests/unit/test_handle_on_recorded_sacct.py reads)."""
from __future__ import annotations

import threading
import time
from typing import Dict, List

from mltrain.backends.slurm import accounting

RECORDED = "\n".join(f"{100 + i}|RUNNING|2026-11-26T10:00:00|Unknown|vm" for i in range(20)) + "\n"


class Sacct:
    """sacct's recorded answer, parsed as the real query parses it, counting the calls."""

    def __init__(self, answer: str = RECORDED, delay: float = 0.05) -> None:
        self.calls: List[List[str]] = []
        self.answer, self.delay = answer, delay

    def __call__(self, job_ids: List[str]) -> Dict[str, accounting.JobState]:
        self.calls.append(list(job_ids))
        time.sleep(self.delay)  # a real sacct takes a moment: callers arriving meanwhile wait for it
        return accounting.parse(self.answer, job_ids) if self.answer else {}


def test_eight_followers_asking_within_one_interval_make_one_call_for_them_all():
    sacct = Sacct()
    shared = accounting.SharedQuery(sacct)
    assert shared(["100"], fresh_s=0.5)["100"].state == "RUNNING" and len(sacct.calls) == 1
    start = threading.Barrier(8)
    answers: Dict[str, List[str]] = {}

    def follower(job_id: str) -> None:
        start.wait()
        for _ in range(2):  # a follower looks again a poll later when a look told it nothing
            answers.setdefault(job_id, []).append(shared([job_id], fresh_s=0.5).get(job_id, accounting.JobState("-")).state)
            time.sleep(0.6)

    threads = [threading.Thread(target=follower, args=(str(101 + i),)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # within the first answer's interval: no call, and nothing yet for jobs it did not cover; the next
    # interval's one call covers all nine
    assert answers == {str(101 + i): ["-", "RUNNING"] for i in range(8)}, answers
    assert len(sacct.calls) == 2, sacct.calls
    assert set(sacct.calls[1]) == {str(100 + i) for i in range(9)}


def test_an_answer_older_than_the_caller_accepts_is_asked_again_for_everyone_following():
    sacct = Sacct(delay=0.0)
    shared = accounting.SharedQuery(sacct)
    shared(["100"], fresh_s=1.0)
    assert shared(["101"], fresh_s=1.0) == {}  # asked within the interval: shared, and it did not cover 101
    assert len(sacct.calls) == 1
    assert shared(["100"], fresh_s=1.0)["100"].state == "RUNNING"
    time.sleep(0.05)
    assert set(shared(["100", "101"], fresh_s=0.01)) == {"100", "101"}
    assert len(sacct.calls) == 2 and sacct.calls[1] == ["100", "101"]


def test_no_answer_is_never_an_answer_and_is_not_asked_again_by_every_follower():
    good, none = Sacct(delay=0.0), Sacct(answer="", delay=0.0)
    sacct = {"now": good}
    shared = accounting.SharedQuery(lambda ids: sacct["now"](ids))
    assert shared(["100"], fresh_s=0.0)["100"].state == "RUNNING"
    sacct["now"] = none  # slurmdbd goes away
    assert shared(["100"], fresh_s=0.0) == {}  # never the earlier answer passed off as this one
    assert shared(["101"], fresh_s=10.0) == {} and len(none.calls) == 1  # the next follower shares the silence


def test_jobs_nobody_asked_about_lately_are_left_out(monkeypatch):
    sacct = Sacct(delay=0.0)
    shared = accounting.SharedQuery(sacct)
    monkeypatch.setattr(accounting.SharedQuery, "STALE_S", 0.05)
    shared(["100"], fresh_s=0.0)
    time.sleep(0.1)
    shared(["101"], fresh_s=0.0)
    assert sacct.calls[-1] == ["101"]
