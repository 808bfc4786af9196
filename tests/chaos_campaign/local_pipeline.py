"""A 3-step pipeline (prepare -> train -> score), each step a script that reads its input and writes its output."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .scenario import Scenario, status_violation

STEP = '''
import os, sys, time
from mltrain import run
name, source, target = sys.argv[1], sys.argv[2], sys.argv[3]
before = open(os.path.join(source, "out.txt")).read().strip() + " " if source != "none" else ""
for step in range(1, 4):
    run.log("progress", step, step=step)
    time.sleep(0.3)
tmp = os.path.join(target, ".out.txt")
open(tmp, "w").write(before + name + "\\n")
os.rename(tmp, os.path.join(target, "out.txt"))
mark(name)
'''

PIPELINE = """\
steps:
  prepare:
    overrides: [job=script, job.script=step.py, 'job.arguments=[prepare,none,${outputs.data}]'COMPUTE]
    outputs: [data]
  train:
    overrides: [job=script, job.script=step.py, 'job.arguments=[train,${inputs.data},${outputs.model}]'COMPUTE]
    inputs: {data: prepare.outputs.data}
    outputs: [model]
  score:
    overrides: [job=script, job.script=step.py, 'job.arguments=[score,${inputs.model},${outputs.scores}]'COMPUTE]
    inputs: {model: train.outputs.model}
    outputs: [scores]
"""

STEPS = ("prepare", "train", "score")


class LocalPipeline(Scenario):
    name = "local_pipeline"
    faults = ("kill_driver", "sigint_foreground", "sigterm_foreground", "kill_rank", "full_disk")
    units = 3
    unit_s = 1.5
    limit_s = 150.0
    extra: Tuple[str, ...] = ()

    def setup(self) -> None:
        self.write("step.py", STEP)
        self.write("conf/pipeline/chaos.yaml", PIPELINE.replace("COMPUTE", ""))

    def start(self):
        self.proc = self.t.start("pipeline=chaos", "run.console=none", *self.extra)
        return self.proc

    def pipeline_record(self) -> Optional[dict]:
        return next((r for r in self.t.run_records() if r.get("pipeline")), None)

    def recover(self, fault: str) -> None:
        self.rc = self.wait_foreground()
        pipe = self.pipeline_record()
        if pipe is None:
            self.notes.append("no pipeline record was made before the fault: the user runs it again")
            self.start()
            self.rc = self.wait_foreground()
            return
        self.wait_or_resume(pipe["id"], pipe.get("status"))

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        return {s: (1, 1) for s in STEPS}

    def check(self, fault: str) -> List[str]:
        pipe = self.pipeline_record()
        if pipe is None:
            return ["pipeline: no pipeline record"]
        out = status_violation("the pipeline", pipe.get("status"), "Completed")
        steps = pipe["pipeline"]["steps"]
        records = {r["id"]: r for r in self.t.run_records()}
        for name in STEPS:
            step = steps.get(name, {})
            out += status_violation(f"step {name} in the pipeline's record", step.get("status"), "Completed")
            run_dir = Path(step.get("run_dir") or "/nonexistent")
            rec = records.get(run_dir.name)
            out += status_violation(f"step {name}'s run.json", (rec or {}).get("status"), "Completed")
            if rec:
                out += self.metric_violations(rec, "progress", 3)
        scores = list(Path(steps.get("score", {}).get("run_dir") or "/nonexistent").rglob("out.txt"))
        text = scores[0].read_text().strip() if scores else None
        if text != "prepare train score":
            out.append(f"outputs: score's output reads {text!r}, expected 'prepare train score'")
        step_runs = {Path(s.get("run_dir") or "").name for s in steps.values()}
        extra = set(records) - step_runs - {pipe["id"]}
        if extra:
            out.append(f"pipeline: run folders of no step: {sorted(extra)}")
        return out

    def running_rank_pids(self) -> List[Tuple[str, int]]:
        found = []
        pipe = self.pipeline_record()
        for name, step in ((pipe or {}).get("pipeline", {}).get("steps") or {}).items():
            path = Path(step.get("run_dir") or "/nonexistent") / "run.json"
            try:
                import json
                rec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            pid = ((rec.get("ranks") or {}).get("0") or {}).get("pid")
            if rec.get("status") == "Running" and pid:
                found.append((name, int(pid)))
        return found
