"""The run handle's view of a pipeline's own run (`mltrain runs status|cancel|wait PIPELINE`).

A pipeline is not started through a Backend (mltrain.pipelines.run starts its steps, each on its own
backend); this one only keeps its record current and stops it. While its driver runs, the driver
keeps the record; a detached Slurm pipeline is brought up to date here, from its steps' runs.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, List, Optional

from mltrain.backends.base import Backend, Plan, driver_alive, stop_driver
from mltrain.errors import MltrainError
from mltrain.runs.record import RunRecord
from mltrain.runs.status import NOT_STARTED, TERMINAL


class PipelineBackend(Backend):
    name = "pipeline"
    wait_poll_s = 0.5

    def gpus_per_node(self, cfg: Any) -> int:
        return 0

    def plan(self, job: Any, share: int = 1) -> Plan:
        raise MltrainError("a pipeline is started with `mltrain pipeline=NAME`, not as a job")

    def launch(self, plans, records, consoles, cancel: threading.Event) -> List[str]:
        raise MltrainError("a pipeline is started with `mltrain pipeline=NAME`, not as a job")

    def refresh(self, records: List[RunRecord]) -> None:
        from mltrain.pipelines import record as precord
        from mltrain.pipelines.runner import settle_graph
        from mltrain.runs.handle import refresh

        for pipeline in records:
            if pipeline.status in TERMINAL or driver_alive(pipeline):
                continue
            steps = _steps(pipeline)
            refresh(list(steps.values()))
            parents = {n: i["parents"] for n, i in pipeline.data["pipeline"]["steps"].items()}
            settle_graph(pipeline.dir.parent, steps, parents)
            precord.sync(pipeline)

    def cancel(self, record: RunRecord) -> None:
        from mltrain.pipelines import record as precord
        from mltrain.runs.handle import backend_of

        if driver_alive(record) and stop_driver(record):
            return  # the driver canceled its steps and recorded the end
        for step in _steps(record).values():
            if step.status == NOT_STARTED:
                precord.cancel_unstarted(step, "canceled by the user")
            elif step.status not in TERMINAL:
                backend_of(step).cancel(step)
        precord.sync(record)

    def log_path(self, record: RunRecord, rank: Optional[int] = None) -> Path:
        return record.log_path(None)


def _steps(pipeline: RunRecord) -> dict:
    """The steps' runs, parents first (run.json keeps its keys sorted; `order` keeps the graph's)."""
    out = {}
    table = pipeline.data["pipeline"]["steps"]
    for name in pipeline.data["pipeline"]["order"]:
        try:
            out[name] = RunRecord.load(table[name]["run_dir"])
        except MltrainError:
            continue
    return out
