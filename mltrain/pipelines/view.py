"""The run handle's view of a pipeline's own run (`mltrain runs status|cancel|wait PIPELINE`).

A pipeline is not a Backend: it is started by mltrain.pipelines.run, and its steps run on their own
backends. This view keeps its record current and stops it, as a backend does for a run. While its
driver runs, the driver keeps the record; a detached Slurm pipeline is brought up to date here from
its steps' runs. The handle passes in how to refresh and stop a step (its own functions), so this
module needs no backend and the backends need no knowledge of pipelines.
"""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from mltrain.backends.base import driver_alive, stop_driver
from mltrain.base.errors import MltrainError
from mltrain.jobspec.status import NOT_STARTED, TERMINAL
from mltrain.pipelines import graph_record as precord
from mltrain.runs.record import RunRecord


class PipelineView:
    name = "pipeline"
    wait_poll_s = 0.5

    def __init__(self, refresh: Callable[[List[RunRecord]], None], backend_of: Callable[[RunRecord], Any]) -> None:
        self._refresh, self._backend_of = refresh, backend_of

    def refresh(self, records: List[RunRecord]) -> None:
        for pipeline in records:
            if pipeline.status in TERMINAL or driver_alive(pipeline):
                continue
            steps = _steps(pipeline)
            self._refresh(list(steps.values()))
            parents = {n: i.parents for n, i in pipeline.doc.pipeline.steps.items()}
            precord.settle_graph(pipeline.dir.parent, steps, parents)
            if not pipeline.doc.pipeline.continue_on_step_failure:
                precord.stop_graph(steps, lambda r: self._backend_of(r).cancel(r))
            precord.sync(pipeline)

    def cancel(self, record: RunRecord) -> None:
        if driver_alive(record) and stop_driver(record):
            return  # the driver canceled its steps and recorded the end
        for step in _steps(record).values():
            if step.status == NOT_STARTED:
                precord.cancel_unstarted(step, "canceled by the user")
            elif step.status not in TERMINAL:
                self._backend_of(step).cancel(step)
        precord.sync(record)

    def locate(self, record: RunRecord) -> Optional[str]:
        return None  # its steps each say where they are


def _steps(pipeline: RunRecord) -> dict:
    """The steps' runs, parents first (run.json keeps its keys sorted; `order` keeps the graph's)."""
    out = {}
    table = pipeline.doc.pipeline.steps
    for name in pipeline.doc.pipeline.order:
        try:
            out[name] = RunRecord.load(table[name].run_dir)
        except MltrainError:
            continue
    return out
