"""Running a pipeline: every step composed, frozen and created before the first one starts (its
snapshot taken then), then started when its parents have completed, at most max_concurrent_steps at
a time on this machine. On Slurm the whole graph is queued at once, each step's job waiting on its
parents' with `afterok`, so the driver may leave (`--detach`) and the cluster runs it unattended.

Each step first asks mltrain.pipelines.reuse whether an earlier step with the same key produced
outputs that are still intact; then it is reused (its outputs linked, never copied) or it runs, and
the console says which and why.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Dict, List, Optional

from mltrain import backends
from mltrain.backends import backend_of, refresh
from mltrain.backends.handover import Submission
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.jobspec.kinds import JOB_KINDS
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, TERMINAL
from mltrain.launch import orchestrate
from mltrain.pipelines import graph, reuse, step_plans
from mltrain.pipelines import graph_record as precord
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import outputs_manifest
from mltrain.runs.record import RunRecord
from mltrain.runs.waiting import wait_until

POLL_S = 0.1
SLURM_POLL_S = 1.0
REPORT_POLL_S = 0.05


@dataclass
class StepRun:
    step: graph.Step
    job: Any                       # FrozenJob
    record: Optional[RunRecord] = None
    console: Optional[Console] = None
    submission: Optional[Submission] = None  # the step's run on its way (Backend.submit)
    done: bool = False             # ended, and settled by the driver

    @property
    def name(self) -> str:
        return self.step.name


#: The mode of a graph this process starts step by step.
DRIVEN = "driver"


class PipelineRun:
    def __init__(self, name: str, steps: List[graph.Step], jobs: Dict[str, Any], root: Path, settings: Any,
                 overrides: List[str]) -> None:
        self.name, self.steps, self.root, self.settings = name, steps, root, settings
        self.overrides = overrides
        self.runs = {s.name: StepRun(s, jobs[s.name]) for s in steps}
        self.console = Console()
        self.record: Optional[RunRecord] = None
        # A graph whose steps all run on one backend that holds dependencies is queued whole on it (no
        # driver needed); any other graph is started step by step by this process.
        names = {j.backend for j in jobs.values()}
        on = backends.get(names.pop()) if len(names) == 1 else None
        self.queued_on: Optional[str] = on.name if on is not None and on.holds_dependencies else None
        # recorded as the graph's `mode`: the backend it is queued on whole, else "driver" (records of 0.2.0
        # 0.4 wrote "local" for the same)
        self.mode = self.queued_on or DRIVEN
        self._external: Dict[tuple, str] = {}

    # ------------------------------------------------------------------ creation
    def create(self, run_dir: Path) -> None:
        """The pipeline's run, then every step's (directory, frozen config, snapshot, output folders)."""
        self.record = precord.create(run_dir, self.name, self.steps, {n: r.job for n, r in self.runs.items()},
                                     self.mode, self.overrides, bool(self.settings.continue_on_step_failure))
        self.log = RunLog(self.record.log_path())
        self.console.status(f"pipeline {self.name}: run {self.record.id}  {self.record.dir}")
        made: List[StepRun] = []
        try:
            for sr in self.runs.values():
                sr.console = Console(prefix=f"[{sr.name}] ")
                sr.record = step_plans.make(step_plans.plan(sr.step, sr.job, self.name, self.record.id), sr.console)
                made.append(sr)
        except MltrainError as exc:
            for sr in made:
                precord.cancel_unstarted(sr.record, f"not started: step could not be created ({exc})", sr.console)
            precord.sync(self.record)
            raise

    # ------------------------------------------------------------------ reuse
    def _input_digests(self, sr: StepRun) -> Dict[str, str]:
        out = {}
        for inp in sr.step.inputs.values():
            if inp.path is not None:
                cache = (inp.path, inp.hash)
                if cache not in self._external:
                    self._external[cache] = reuse.digest(Path(inp.path), inp.hash)
                out[inp.name] = self._external[cache]
                continue
            parent = self.runs[inp.step].record
            parent.reload()
            produced = (parent.doc.pipeline_step or {}).get("produced") or {}
            if parent.status == COMPLETED and inp.output in produced:
                out[inp.name] = produced[inp.output]["digest"]
            else:
                out[inp.name] = f"pending:{inp.step}:{parent.id}"
        return out

    def _parts(self, sr: StepRun) -> Dict[str, Any]:
        job = sr.job
        names = {job.run_dir: "<run>"}
        names.update({str(p): f"<inputs.{n}>" for n, p in (job.config.get("inputs") or {}).items()})
        kind = job.config["job"]["kind"]
        environment = None
        if job.environment:
            from mltrain.environments.spec import EnvironmentSpec  # startup

            environment = EnvironmentSpec(**job.environment["spec"]).cache_key()
        return {"program": f"{kind} (mltrain {version('mltrain')})" if JOB_KINDS[kind].builtin else kind,
                "version": sr.step.version, "config": reuse.config_part(job.config, names),
                "source": _hashed(reuse.snapshot_files(sr.record.dir), sr.step.hash_paths), "environment": environment,
                "inputs": self._input_digests(sr), "outputs": list(sr.step.outputs)}

    def decide(self, sr: StepRun) -> Optional[RunRecord]:
        """The producer this step reuses, or None when it must run; the reason is said and recorded."""
        parts = self._parts(sr)
        pending = any(str(v).startswith("pending:") for v in parts["inputs"].values())
        key = None if pending else reuse.key_of(parts)
        producer, why = None, None
        if self.settings.force_rerun:
            why = "runs: --force-rerun (pipeline.force_rerun) reuses nothing"
        elif not sr.step.allow_reuse:
            why = "runs: allow_reuse is false"
        else:
            producer, broken = self._producer(key) if key else (None, None)
            if producer is None:
                why = "runs: " + (broken or self._what_changed(sr, parts))
        if producer is not None:
            why = f"reused: run {producer.id} has the same key {key[:12]} (config, source, environment and inputs unchanged)"
        mark = {**(sr.record.doc.pipeline_step or {}), "parts": parts, "key": key, "decision": why}
        sr.record.update(pipeline_step=mark)
        sr.console.status(why)
        self.log.info(f"[{sr.name}] {why}")
        return producer

    def _producer(self, key: str):
        broken = None
        for entry in reversed(reuse.entries(self.root)):
            if entry.get("key") != key:
                continue
            try:
                earlier = RunRecord.load(entry["run_dir"])
            except MltrainError:
                broken = f"run {entry.get('run_id')} had the same key, but its run directory is gone"
                continue
            mark = earlier.doc.pipeline_step or {}
            if earlier.status != COMPLETED or mark.get("key") != key:
                continue
            problem = reuse.intact(earlier.dir, mark.get("produced") or {})
            if problem is None:
                return earlier, None
            broken = f"run {earlier.id} had the same key, but {problem}"
        return None, broken

    def _what_changed(self, sr: StepRun, parts: Dict[str, Any]) -> str:
        for entry in reversed(reuse.entries(self.root)):
            if entry.get("pipeline") != self.name or entry.get("step") != sr.name:
                continue
            try:
                earlier = RunRecord.load(entry["run_dir"])
            except MltrainError:
                continue
            reasons = reuse.explain((earlier.doc.pipeline_step or {}).get("parts") or {}, parts)
            if reasons:
                return ", ".join(reasons) + f" (against run {earlier.id})"
        pending = [v.split(":")[1] for v in parts["inputs"].values() if str(v).startswith("pending:")]
        if pending:
            return f"upstream step {', '.join(sorted(set(pending)))} runs again"
        return "no earlier run of this step"

    def reuse_outputs(self, sr: StepRun, producer: RunRecord) -> None:
        """Link the producer's outputs into the step's run (read in place, never copied)."""
        for out in sr.step.outputs:
            target = sr.record.dir / "outputs" / out
            target.rmdir()
            target.symlink_to(producer.dir / "outputs" / out, target_is_directory=True)
        mark = {**sr.record.doc.pipeline_step, "reused_from": producer.id,
                "produced": (producer.doc.pipeline_step or {}).get("produced") or {}}
        # no Finalizing: nothing ran
        sr.record.set_status(COMPLETED, pipeline_step=mark, outputs=outputs_manifest(producer.dir / "outputs"))
        sr.console.status(f"{COMPLETED} (reused)")
        sr.done = True

    # ------------------------------------------------------------------ this machine
    def run_here(self, interrupt: threading.Event) -> None:
        """Start each step once its parents completed, at most max_concurrent_steps at a time."""
        limit = max(1, int(self.settings.max_concurrent_steps))
        share = max(1, min(limit, _width(self.steps)))
        stopping: Optional[str] = None

        def one_pass() -> bool:
            nonlocal stopping
            if interrupt.is_set() and stopping is None:
                stopping = "the pipeline was canceled"
                self.console.status(f"{stopping}: canceling every step in flight")
                for sr in self.runs.values():
                    if sr.submission is not None and not sr.done:
                        sr.submission.cancel(stopping)
            for sr in self.runs.values():
                if sr.done or sr.submission is not None:
                    continue
                parents = {p: self.runs[p].record for p in sr.step.parents}
                blocked = stopping and f"not started: {stopping}" or precord.upstream_reason(sr.record, parents)
                if blocked:
                    precord.cancel_unstarted(sr.record, blocked, sr.console)
                    sr.done = True
                    continue
                if not all(self.runs[p].done for p in sr.step.parents):
                    continue
                if sum(1 for r in self.runs.values() if r.submission is not None and not r.done) >= limit:
                    continue
                producer = self.decide(sr)
                if producer is not None:
                    self.reuse_outputs(sr, producer)
                    continue
                assert sr.record is not None and sr.console is not None
                sr.submission = orchestrate.submit(sr.job, sr.record, sr.console, share=share)
            for sr in self.runs.values():
                if sr.submission is not None and not sr.done and sr.submission.describe().ended:
                    self._settle(sr)
            failed = None if self.settings.continue_on_step_failure or stopping else \
                precord.failed_step({n: sr.record for n, sr in self.runs.items() if sr.done})
            if failed is not None:
                stopping = precord.stop_reason(failed)
                self.console.status(f"{stopping}: canceling every step in flight")
                for sr in self.runs.values():
                    if sr.submission is not None and not sr.done:
                        sr.submission.cancel(f"canceled: {stopping}")
                return False  # the steps not started yet are canceled on the next pass
            precord.sync(self.record)
            return all(sr.done for sr in self.runs.values())

        wait_until(one_pass, poll=POLL_S)

    def _settle(self, sr: StepRun) -> None:
        sr.record.reload()
        if sr.record.status == COMPLETED:
            precord.settle_completed(sr.record, self.root, {p: self.runs[p].record for p in sr.step.parents})
        sr.done = True

    # ------------------------------------------------------------------ Slurm
    def submit_graph(self) -> None:
        """Queue every step that must run, each waiting on its parents' Slurm jobs (afterok; a job
        whose parent failed is removed by Slurm itself: kill_on_invalid_dep)."""
        assert self.queued_on is not None
        for sr in self.runs.values():
            parents = {p: self.runs[p].record for p in sr.step.parents}
            for parent in parents.values():
                parent.reload()
            blocked = precord.upstream_reason(sr.record, parents)
            if blocked:
                precord.cancel_unstarted(sr.record, blocked, sr.console)
                sr.done = True
                continue
            producer = self.decide(sr)
            if producer is not None:
                self.reuse_outputs(sr, producer)
                continue
            # queued now; the graph is followed here, or not at all
            status = orchestrate.queue_after(sr.job, list(parents.values()), sr.record, _Queued(sr.console.prefix))
            if status != QUEUED:
                sr.done = True
        precord.sync(self.record)

    def follow_graph(self, interrupt: threading.Event) -> None:
        """Follow a queued graph until every step has ended, settling each as it ends."""
        said = {n: sr.record.status for n, sr in self.runs.items() if sr.done}  # already said when reused
        canceled = False
        marks: Optional[tuple] = None
        looked = 0.0

        def one_look() -> bool:
            nonlocal marks, looked, canceled
            # Slurm runs the graph; the driver only reports it. Its ranks' reports and run.json files are
            # watched every REPORT_POLL_S (a stat each). A step whose files changed is looked at then (its
            # ranks' reports end it without sacct; a step they say runs asks sacct for itself only), and
            # every step every SLURM_POLL_S (one sacct for all: 0.1 s of a 2-core machine that the steps
            # need): a step's end is seen within REPORT_POLL_S, a failure the ranks could not report
            # within SLURM_POLL_S, and a settled step's own run.json write asks nothing about the others.
            now_marks = self._marks()
            due = time.monotonic() - looked >= SLURM_POLL_S or interrupt.is_set()
            if now_marks == marks and not due:
                return False
            changed = {name for i, name in enumerate(self.runs)
                       if marks is None or now_marks[2 * i:2 * i + 2] != marks[2 * i:2 * i + 2]}
            marks = now_marks
            if due:
                looked = time.monotonic()
            if interrupt.is_set() and not canceled:
                canceled = True
                self.console.status("the pipeline was canceled: canceling every queued or running step")
                for sr in self.runs.values():
                    sr.record.reload()
                    if sr.record.status not in TERMINAL:
                        backend_of(sr.record).cancel(sr.record)
            records = [sr.record for sr in self.runs.values()]
            for r in records:
                r.reload()
            refresh(records if due else [sr.record for name, sr in self.runs.items() if name in changed])
            precord.settle_graph(self.root, {n: sr.record for n, sr in self.runs.items()},
                         {n: sr.step.parents for n, sr in self.runs.items()})
            if not self.settings.continue_on_step_failure and not canceled:
                stopped = precord.stop_graph({n: sr.record for n, sr in self.runs.items()},
                                             lambda r: backend_of(r).cancel(r))
                if stopped:
                    canceled = True
                    self.console.status(f"{stopped}: canceled every queued or running step")
            for sr in self.runs.values():
                sr.record.reload()
                status = sr.record.status
                if said.get(sr.name) != status:
                    said[sr.name] = status
                    extra = f": {sr.record.doc.error}" if status in (FAILED, CANCELED) else ""
                    sr.console.status(f"{status}{extra}")
            return precord.sync(self.record) in TERMINAL

        wait_until(one_look, poll=REPORT_POLL_S)

    def _marks(self) -> tuple:
        """The modification times of each step's reports folder and run.json (renames into a folder change
        its time): unchanged, nothing a look could learn from the ranks."""
        found = []
        for sr in self.runs.values():
            for path in (sr.record.dir / "ranks", sr.record.dir / "run.json"):
                try:
                    found.append(os.stat(path).st_mtime_ns)
                except OSError:
                    found.append(0)
        return tuple(found)


class _Queued(Console):
    """A step's console while its graph is queued: the Slurm backend's advice to follow each run on its
    own is left out; the pipeline is followed as one (`mltrain runs status PIPELINE`)."""

    def status(self, text: str) -> None:
        if not text.startswith("detached: "):
            super().status(text)


def _hashed(files: Dict[str, str], hash_paths: List[str]) -> Dict[str, str]:
    if not hash_paths:
        return files
    return {f: h for f, h in files.items() if any(f == p or f.startswith(p + "/") for p in hash_paths)}


def _width(steps: List[graph.Step]) -> int:
    """The most steps at one depth of the graph: how many may run side by side (they share the cores)."""
    depth: Dict[str, int] = {}
    for s in steps:
        depth[s.name] = 1 + max((depth[p] for p in s.parents), default=-1)
    counts: Dict[int, int] = {}
    for d in depth.values():
        counts[d] = counts.get(d, 0) + 1
    return max(counts.values())


def check_detach(queued_on: Optional[str]) -> None:
    if queued_on is None:
        raise ConfigError("run.detach", "only a pipeline whose every step runs on Slurm can be detached (its graph "
                                        "is queued whole); local steps are started by the driver: keep it running, "
                                        "e.g. under nohup")


def pipeline_dir(root: Path, run_id: str) -> Path:
    path = root / run_id
    if path.exists():
        raise ConfigError("run.id", f"a run already exists at {path}; run directories are never reused")
    return path
