"""A HyperDrive sweep's record, sweep.json, typed: one reader (`SweepDoc.from_json`) and one writer
(`SweepDoc.to_json`), versioned by `layout`.

mltrain.sweeps.results builds it from the sweep controller and rewrites it as members progress, so
`mltrain runs best` works while the sweep runs. Layouts read: 1 (no `layout` field, written before
this module), 2 (the same fields with `layout`) and 3 (members add `trial` and `judged`, which
`mltrain runs resume SWEEP` reads; missing, they read as the member's index and 0). A metric that is not a finite number (a member
that logged NaN or inf) is written as a string, as JSON has no such numbers. `Any` appears only for
what comes from the user: the sampled parameter values and the search space as they wrote it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Union

from mltrain.base.errors import MltrainError
from mltrain.jobspec.records import known_fields

SWEEP_LAYOUT = 3
#: A metric value as sweep.json holds it: a number, or "nan"/"inf" as text.
Value = Union[float, str, None]


def json_number(x: Optional[float]) -> Value:
    return x if x is None or math.isfinite(x) else str(x)


@dataclass
class MemberRow:
    index: int
    run_id: Optional[str]
    run_dir: Optional[str]
    params: Dict[str, Any]
    overrides: List[str]
    status: str
    best: Value = None
    last: Value = None
    intervals: int = 0
    values: List[Value] = field(default_factory=list)
    # Which early-termination rule stopped it, and at which interval (Azure's policy wording).
    canceled_by: Optional[str] = None
    canceled_at_interval: Optional[int] = None
    error: Optional[str] = None
    started: Optional[float] = None
    ended: Optional[float] = None
    # What `mltrain runs resume SWEEP` needs: the member's Optuna trial number, and the last interval the
    # early-termination policy judged it at (it is not judged there again).
    trial: Optional[int] = None
    judged: int = 0

    @property
    def scored(self) -> bool:
        return isinstance(self.best, (int, float))


@dataclass
class SweepDoc:
    sweep_dir: str
    status: str
    sampling: str
    primary_metric: Optional[str]
    goal: str
    space: Dict[str, Any]
    members: List[MemberRow]
    stopped_because: Optional[str] = None
    seed: Optional[int] = None
    fixed_overrides: List[str] = field(default_factory=list)
    max_total_runs: Optional[int] = None
    max_concurrent_runs: Optional[int] = None
    max_duration_minutes: Optional[float] = None
    early_termination: Dict[str, Any] = field(default_factory=dict)
    started: Optional[float] = None
    ended: Optional[float] = None
    best_run_id: Optional[str] = None
    best_value: Value = None
    best_params: Optional[Dict[str, Any]] = None
    layout: int = SWEEP_LAYOUT

    @classmethod
    def from_json(cls, raw: Dict[str, Any]) -> SweepDoc:
        try:
            members = [MemberRow(**known_fields(MemberRow, m)) for m in raw["members"]]
            fields = {k: v for k, v in known_fields(cls, raw).items() if k not in ("members", "layout")}
            return cls(members=members, **fields)
        except (KeyError, TypeError) as exc:
            raise MltrainError(f"not a sweep record mltrain can read ({type(exc).__name__}: {exc})") from None

    def to_json(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)
