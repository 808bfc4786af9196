"""What a HyperDrive sweep leaves behind: sweep.json (rewritten as members progress, so `runs best`
works while it runs), the console summary sorted by the primary metric, and a PNG chart of the
primary metric per member over intervals."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, List, Optional

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.jobspec.status import CANCELED
from mltrain.jobspec.sweep_record import MemberRow, SweepDoc, json_number
from mltrain.sweeps.policies import best_of

SWEEP_FILE = "sweep.json"
CHART_FILE = "primary_metric.png"


def member_row(member: Any, goal: str) -> MemberRow:
    values = member.values
    stopped = member.status == CANCELED or member.running
    return MemberRow(
        index=member.index, run_id=member.run_id, run_dir=member.job.run_dir if member.job is not None else None,
        params=member.params, overrides=member.overrides, status=member.status,
        best=json_number(best_of(values, goal)) if values else None,
        last=json_number(values[-1]) if values else None, intervals=len(values),
        values=[json_number(v) for v in values], canceled_by=member.reason if stopped else None,
        canceled_at_interval=member.cut_at if stopped else None, error=member.error, started=member.started,
        ended=member.ended, trial=member.trial.number if member.trial is not None else None, judged=member.judged)


def document(controller: Any, final: bool) -> SweepDoc:
    s = controller.settings
    rows = [member_row(m, s.goal) for m in controller.members]
    best = best_row(rows, s.goal) if s.primary_metric else None
    if controller.interrupted:
        status = "Canceled"
    else:
        status = "Completed" if final else "Running"
    return SweepDoc(
        sweep_dir=str(controller.sweep_dir), status=status, stopped_because=controller.stop_reason,
        sampling=s.sampling, seed=controller.seed, primary_metric=s.primary_metric, goal=s.goal,
        space=controller.space.describe(), fixed_overrides=controller.space.fixed, max_total_runs=controller.total,
        max_concurrent_runs=controller.concurrent, max_duration_minutes=s.max_duration_minutes,
        early_termination=vars(s.early_termination), started=controller.started,
        ended=time.time() if final else None, best_run_id=best.run_id if best else None,
        best_value=best.best if best else None, best_params=best.params if best else None, members=rows)


def best_row(rows: List[MemberRow], goal: str) -> Optional[MemberRow]:
    """The member with the best primary-metric value of all that logged one, cut or not (Azure's best
    child run is chosen the same way); ties go to the earlier member."""
    scored = [r for r in rows if r.scored]
    if not scored:
        return None
    sign = -1 if goal == "maximize" else 1
    return sorted(scored, key=lambda r: (sign * float(r.best or 0), r.index))[0]


def write(controller: Any, final: bool = False) -> SweepDoc:
    doc = document(controller, final)
    atomic_write(controller.sweep_dir / SWEEP_FILE, json.dumps(doc.to_json(), indent=2))
    return doc


def summary_lines(doc: SweepDoc) -> List[str]:
    metric, goal = doc.primary_metric, doc.goal
    rows = doc.members
    if metric:
        sign = -1 if goal == "maximize" else 1
        rows = sorted(rows, key=lambda r: (not r.scored, sign * r.best if isinstance(r.best, (int, float)) else 0.0,
                                           r.index))
    keys = list(doc.space)
    head = f"sweep of {len(rows)} runs ({doc.sampling}" + (f", {metric} {goal}" if metric else "") + "):"
    out = [head]
    for r in rows:
        mark = "*" if r.run_id and r.run_id == doc.best_run_id else " "
        params = " ".join(f"{k}={_short(r.params.get(k))}" for k in keys)
        value = "" if not metric else (f"{metric}={_short(r.best)}" if r.best is not None else f"{metric}=-")
        why = f"  ({r.canceled_by})" if r.canceled_by else (f"  ({r.error})" if r.error else "")
        out.append(f" {mark}#{r.index:<3} {r.status:<9} {value:<24} {params}  {r.run_id or ''}{why}")
    if doc.best_run_id:
        out.append(f"best: {doc.best_run_id}  {metric}={_short(doc.best_value)}  "
                   + " ".join(f"{k}={_short(v)}" for k, v in (doc.best_params or {}).items()))
    return out


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def chart(doc: SweepDoc, path: Path) -> Optional[Path]:
    """The primary metric of every member over intervals; a member cut by the policy ends in an x on a
    dashed line, the best member is drawn thick. None when there is nothing to draw."""
    rows = [r for r in doc.members if r.values]
    if not doc.primary_metric or not rows:
        return None
    import matplotlib  # heavy

    matplotlib.use("Agg")  # headless: no display is needed or looked for
    import matplotlib.pyplot as plt  # heavy

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for r in rows:
        ys = [float(v) if isinstance(v, (int, float)) else math.nan for v in r.values]
        xs = list(range(1, len(ys) + 1))
        cut = bool(r.canceled_by) and r.status == CANCELED
        best = r.run_id == doc.best_run_id
        label = f"#{r.index} " + " ".join(f"{_short(v)}" for v in r.params.values())
        (line,) = ax.plot(xs, ys, linestyle="--" if cut else "-", linewidth=2.8 if best else 1.3,
                          marker="o", markersize=3, label=label + (" (best)" if best else " (cut)" if cut else ""))
        if cut:
            ax.plot([xs[-1]], [ys[-1]], marker="x", markersize=11, markeredgewidth=2.5, color=line.get_color())
    ax.set_xlabel("interval (values logged)")
    ax.set_ylabel(doc.primary_metric)
    policy = doc.early_termination.get("policy")
    ax.set_title(f"{doc.primary_metric} per member ({doc.sampling} sampling, early termination: {policy})")
    ax.grid(alpha=0.3)
    if len(rows) <= 20:
        ax.legend(fontsize=7, loc="best")
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)
    return path


def load(ref: Optional[str], runs_root: Path) -> SweepDoc:
    """A sweep's sweep.json by sweep directory, its name under <runs>/_sweeps, or the newest one."""
    sweeps = runs_root / "_sweeps"
    if ref:
        candidates = [Path(ref).expanduser(), sweeps / ref]
        path = next((p / SWEEP_FILE for p in candidates if (p / SWEEP_FILE).is_file()), None)
        if path is None:
            matches = sorted(p for p in sweeps.glob(f"{ref}*") if (p / SWEEP_FILE).is_file()) if sweeps.is_dir() else []
            if len(matches) != 1:
                what = "is ambiguous" if matches else "has no sweep.json"
                raise MltrainError(f"sweep '{ref}' {what} (sweeps are folders under {sweeps})")
            path = matches[0] / SWEEP_FILE
    else:
        found = sorted(sweeps.glob(f"*/{SWEEP_FILE}")) if sweeps.is_dir() else []
        if not found:
            raise MltrainError(f"no HyperDrive sweep under {sweeps} (a sweep with sweep.* settings writes sweep.json)")
        path = found[-1]
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise MltrainError(f"{path} is unreadable ({exc})") from None
    try:
        return SweepDoc.from_json(raw)
    except MltrainError as exc:
        raise MltrainError(f"{path}: {exc}") from None
