"""The run record's types: what run.json holds, typed, with one reader (`RunDoc.from_json`) and one
writer (`RunDoc.to_json`), versioned by `layout`.

Every run directory has a run.json: a single run's, a sweep member's, a pipeline step's, and a
pipeline's own run (whose `pipeline` field holds its graph). mltrain.runs.record reads and writes it
atomically; every other module reads these fields, never the JSON. Layouts read:

- 0.1.0 (no `layout`, no `created`): `backend` named the process group (gloo, nccl), the phases began
  at Queued; the backend is then told by the compute and distribution (mltrain.backends.backend_for).
- 2 (no `layout` field either, `created` present): today's fields, written before this module.
- 3: the same fields with `layout` written.

Keys a later mltrain wrote that this one does not know are kept in `extra` and written back, so an
older mltrain looking at a newer run loses nothing. `Any` appears only where the data comes from
outside mltrain's own records: the environment listing, the snapshot summary, a step's reuse parts
(hashes of the user's files and config), the user's own parameters and a backend's own part (typed by
the backend, which alone reads it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple, TypedDict

from mltrain.base.errors import MltrainError

#: run.json layout version.
RUN_LAYOUT = 3


def known_fields(cls: type, data: Dict[str, Any]) -> Dict[str, Any]:
    """The keys of `data` that are fields of the dataclass `cls` (a later layout's extra keys left out)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _compact(data: Dict[str, Any], keep: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """Optional fields are written only once they have a value, as the layouts before this one did."""
    def empty(v: Any) -> bool:  # not `v in (None, False, ...)`: 0 == False, and rank 0 is a value
        return v is None or v is False or (isinstance(v, (dict, list)) and not v)

    return {k: v for k, v in data.items() if k in keep or not empty(v)}


@dataclass
class World:
    node_count: int
    process_count_per_node: int
    world_size: int
    # Where the ranks meet, once the start knows (a local port handed out by the OS).
    master_addr: Optional[str] = None
    master_port: Optional[int] = None

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> World:
        return cls(**known_fields(cls, data))

    def to_json(self) -> Dict[str, Any]:
        return _compact(dataclasses.asdict(self), keep=("node_count", "process_count_per_node", "world_size"))


@dataclass
class SweepRef:
    """The sweep a run is a member of (both None for a lone run)."""

    dir: Optional[str] = None
    index: Optional[int] = None


@dataclass
class RankEntry:
    """What a rank reported, or its supervisor saw, of it."""

    exit_code: Optional[int] = None
    host: Optional[str] = None
    pid: Optional[int] = None
    attempt: Optional[int] = None
    stopped_by_mltrain: Optional[bool] = None
    # A stop signal (SIGTERM: a cancel, a time limit, a preemption) reached the rank's wrapper while its
    # program ran (Slurm ranks, whose stop comes from the scheduler, not from mltrain's own supervisor).
    stopped_by_signal: Optional[bool] = None
    # The GPUs the rank's process was given, as its CUDA_VISIBLE_DEVICES said ("" = none; absent = not set,
    # every device of its node visible).
    devices: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


@dataclass
class MlflowMark:
    """How far the mirror (mltrain.tracking) has copied the run into MLflow's store."""

    run_id: str
    lines: int = 0
    folded: int = 0
    status: Optional[str] = None


@dataclass
class StepEntry:
    """One step in a pipeline's own record."""

    run_id: str
    run_dir: str
    parents: List[str]
    status: str
    reused_from: Optional[str] = None
    reason: Optional[str] = None
    phases: Dict[str, float] = field(default_factory=dict)
    error: Optional[str] = None
    # Where the step's job is in its scheduler's terms ("Slurm job 12"), once it was queued on one.
    scheduler: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        return _compact(dataclasses.asdict(self), keep=("run_id", "run_dir", "parents", "status", "reused_from", "reason"))


@dataclass
class PipelineGraph:
    """A pipeline's graph, in its own run's record: the steps in graph order, each with its run."""

    name: str
    mode: str
    order: List[str]
    steps: Dict[str, StepEntry]
    # pipeline.continue_on_step_failure: false stops the whole graph at its first failed step (also
    # for whoever settles a detached graph later); records written before it had no such setting.
    continue_on_step_failure: bool = True

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> PipelineGraph:
        steps = {name: StepEntry(**known_fields(StepEntry, info)) for name, info in data["steps"].items()}
        return cls(name=data["name"], mode=data["mode"], order=list(data["order"]), steps=steps,
                   continue_on_step_failure=bool(data.get("continue_on_step_failure", True)))

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "mode": self.mode, "order": self.order,
                               "steps": {n: s.to_json() for n, s in self.steps.items()}}
        if not self.continue_on_step_failure:  # written only where it differs from what older records meant
            out["continue_on_step_failure"] = False
        return out


class OutputFile(TypedDict):
    """One file of the outputs/ manifest, its path relative to outputs/."""

    path: str
    bytes: int


class Attempt(TypedDict):
    """An earlier attempt of a resumed run, as it was when the next one began."""

    status: str
    phases: Dict[str, float]
    ranks: Dict[str, Dict[str, Any]]
    error: Optional[str]


@dataclass
class RunDoc:
    id: str
    experiment: str
    status: str
    created: float
    phases: Dict[str, float]
    backend: str
    compute: str
    distribution: str
    world: World
    command: List[str]
    cwd: str
    host: Optional[str] = None
    driver_pid: Optional[int] = None
    process_group: Optional[str] = None
    kill_grace_s: float = 5.0
    overrides: List[str] = field(default_factory=list)
    sweep: SweepRef = field(default_factory=SweepRef)
    ranks: Dict[str, RankEntry] = field(default_factory=dict)
    error: Optional[str] = None
    failed_rank: Optional[int] = None
    # The outputs/ manifest, written when the run ends.
    outputs: Optional[List[OutputFile]] = None
    # Earlier attempts of a resumed run.
    attempts: List[Attempt] = field(default_factory=list)
    # Nodes lost under the run, each handled once: {"attempt", "job_id", "lost": [...], "at", "then"} (a cluster's).
    node_failures: List[Dict[str, Any]] = field(default_factory=list)
    # The backend's own part, keyed by the backend's name in run.json (`"slurm": {"job_id": ...}`): only the
    # backend reads it, typed by its own class (mltrain.backends.slurm.run_part); `job_id` is the id a scheduler
    # knows the run by.
    backend_parts: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    detached: bool = False
    environment: Dict[str, Any] = field(default_factory=dict)
    snapshot: Optional[Dict[str, Any]] = None
    mlflow: Optional[MlflowMark] = None
    # A pipeline's own run: its graph. A pipeline's step: its reuse bookkeeping (mltrain.pipelines.reuse).
    pipeline: Optional[PipelineGraph] = None
    pipeline_step: Optional[Dict[str, Any]] = None
    # `runs rerun`: the run this one reproduces.
    reproduces: Optional[str] = None
    # What the job's scripts logged with mlflow.log_param, folded in by the mirror.
    script_params: Dict[str, str] = field(default_factory=dict)
    # Which front end submitted the run, and from where (a v1 control script's file and line).
    origin: Optional[Dict[str, Any]] = None
    extra: Dict[str, Any] = field(default_factory=dict)
    layout: int = RUN_LAYOUT

    # ------------------------------------------------------------------ the one reader
    @classmethod
    def from_json(cls, raw: Dict[str, Any]) -> RunDoc:
        try:
            return cls._read(dict(raw))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise MltrainError(f"not a run record mltrain can read ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _read(cls, data: Dict[str, Any]) -> RunDoc:
        phases = {str(k): float(v) for k, v in data["phases"].items()}
        names = {f.name for f in dataclasses.fields(cls)}
        backend = str(data.get("backend"))
        # under the backend's name; in 0.1.0 records (whose `backend` is the process group), the compute's
        part_key = next((k for k in (backend, str(data.get("compute")))
                         if k not in names and isinstance(data.get(k), dict)), None)  # not `pipeline`'s graph
        extra = {k: v for k, v in data.items() if k not in names and k != part_key}
        extra.update(data.get("extra") or {})
        world = World.from_json(data["world"])
        sweep = data.get("sweep") or {}
        mark, graph = data.get("mlflow"), data.get("pipeline")
        return cls(
            id=str(data["id"]), experiment=str(data.get("experiment") or "mltrain"), status=str(data["status"]),
            # 0.1.0 records start at Queued and have no `created`
            created=float(data.get("created") or min(phases.values())),
            phases=phases, backend=backend, compute=str(data.get("compute")),
            distribution=str(data.get("distribution")), world=world, command=list(data.get("command") or []),
            cwd=str(data.get("cwd") or ""), host=data.get("host"), driver_pid=data.get("driver_pid"),
            process_group=data.get("process_group"), kill_grace_s=float(data.get("kill_grace_s") or 5.0),
            overrides=list(data.get("overrides") or []),
            sweep=SweepRef(dir=sweep.get("dir"), index=sweep.get("index")),
            ranks={str(r): RankEntry(**known_fields(RankEntry, info)) for r, info in (data.get("ranks") or {}).items()},
            error=data.get("error"), failed_rank=data.get("failed_rank"), outputs=data.get("outputs"),
            attempts=list(data.get("attempts") or []), node_failures=list(data.get("node_failures") or []),
            backend_parts={part_key: dict(data[part_key])} if part_key is not None else {},
            detached=bool(data.get("detached")), environment=dict(data.get("environment") or {}),
            snapshot=data.get("snapshot"), mlflow=MlflowMark(**known_fields(MlflowMark, mark)) if mark else None,
            pipeline=PipelineGraph.from_json(graph) if graph else None, pipeline_step=data.get("pipeline_step"),
            reproduces=data.get("reproduces"), script_params=dict(data.get("script_params") or {}),
            origin=data.get("origin"), extra=extra, layout=RUN_LAYOUT,
        )

    # ------------------------------------------------------------------ the one writer
    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = dict(self.extra)
        out.update({
            "id": self.id, "experiment": self.experiment, "status": self.status, "created": self.created,
            "phases": self.phases, "host": self.host, "driver_pid": self.driver_pid, "backend": self.backend,
            "compute": self.compute, "distribution": self.distribution, "process_group": self.process_group,
            "world": self.world.to_json(), "command": self.command, "kill_grace_s": self.kill_grace_s,
            "cwd": self.cwd, "overrides": self.overrides,
            "sweep": {"dir": self.sweep.dir, "index": self.sweep.index},
            "ranks": {r: e.to_json() for r, e in self.ranks.items()}, "error": self.error, "layout": self.layout,
        })
        optional = {
            "failed_rank": self.failed_rank, "outputs": self.outputs, "attempts": self.attempts,
            "node_failures": self.node_failures, "detached": self.detached,
            "environment": self.environment, "snapshot": self.snapshot,
            "mlflow": dataclasses.asdict(self.mlflow) if self.mlflow else None,
            "pipeline": self.pipeline.to_json() if self.pipeline else None, "pipeline_step": self.pipeline_step,
            "reproduces": self.reproduces, "script_params": self.script_params, "origin": self.origin,
        }
        out.update(_compact(optional, keep=("outputs",) if self.outputs is not None else ()))
        out.update(self.backend_parts)
        return out

    # ------------------------------------------------------------------ reading
    @property
    def ended_at(self) -> float:
        """The time of its latest phase (its end, once it has ended)."""
        return max(self.phases.values())

    def set(self, **fields: object) -> None:
        """Assign fields by name; a name run.json does not have is mltrain's own mistake."""
        names = {f.name for f in dataclasses.fields(self)}
        for key, value in fields.items():
            if key not in names:
                raise AttributeError(f"run records have no field {key!r}")
            setattr(self, key, value)
