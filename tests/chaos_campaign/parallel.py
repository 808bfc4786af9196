"""A parallel job: 16 files scored in mini-batches of 2 by 2 instances x 2 workers; each item writes a marker."""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from .scenario import Scenario, status_violation

ITEMS = 16

SCORE = '''
import os, time
def init():
    pass
def run(mini_batch):
    rows = []
    for path in mini_batch:
        time.sleep(0.15)
        name = os.path.basename(path).split(".")[0]
        mark(name)
        rows.append("%s %s" % (name, open(path).read().strip()))
    return rows
'''


class ParallelJob(Scenario):
    name = "parallel_job"
    faults = ("kill_worker", "kill_driver", "sigint_foreground", "sigterm_foreground")
    units = ITEMS
    unit_s = 0.3
    limit_s = 150.0

    def setup(self) -> None:
        self.write("score.py", SCORE)
        for i in range(ITEMS):
            self.write(f"inputs/item{i:02d}.txt", f"value{i}\n")

    def start(self):
        self.proc = self.t.start("job=parallel", "job.entry_script=score.py", "job.input_data=./inputs",
                                 "job.mini_batch_size=2", "job.max_concurrency_per_instance=2",
                                 "distribution.node_count=2", "run.id=batch", "run.console=none")
        return self.proc

    def record(self) -> Optional[dict]:
        return self.run_record("batch")

    def recover(self, fault: str) -> None:
        self.resume_run("batch")

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        # A mini-batch whose worker died is run again whole (Azure's retry_settings): its items before the death
        # did their work twice; the outputs still hold each row once (checked below).
        return {f"item{i:02d}": (1, 2) for i in range(ITEMS)}

    def check(self, fault: str) -> List[str]:
        rec = self.record()
        if rec is None:
            return ["run: no record of the run"]
        out = status_violation("the parallel job", rec.get("status"), "Completed")
        rows = list((self.t.home / "runs" / "batch").rglob("parallel_run_step.txt"))
        lines = rows[0].read_text().split("\n") if rows else []
        lines = [line for line in lines if line]
        want = [f"item{i:02d} value{i}" for i in range(ITEMS)]
        if lines != want:
            missing = sorted(set(want) - set(lines))
            doubled = sorted({x for x in lines if lines.count(x) > 1})
            out.append(f"outputs: {len(lines)} rows (missing {missing[:4]}, doubled {doubled[:4]}"
                       f"{', out of order' if not missing and not doubled else ''}), expected {ITEMS} in input order")
        return out

    def worker_pids(self) -> List[Tuple[str, int]]:
        return self.t.processes_running("parallel/worker.py")
