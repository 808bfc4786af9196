"""Per-rank reports (ranks/rank_<N>.json), written by each rank's wrapper when no driver process
watches the ranks directly (Slurm tasks, mpirun ranks), and the run's failure read back from them."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Optional, Tuple

from mltrain.base.atomic import atomic_write
from mltrain.ranks.process import describe_exit, tail
from mltrain.runs.record import RunRecord


def write(run_dir: str | Path, rank: int, **fields) -> None:
    folder = Path(run_dir) / "ranks"
    folder.mkdir(exist_ok=True)
    path = folder / f"rank_{rank}.json"
    data = json.loads(path.read_text()) if path.is_file() else {}
    data.update(fields)
    atomic_write(path, json.dumps(data))


def read(run_dir: str | Path) -> Dict[int, dict]:
    out = {}
    for path in sorted((Path(run_dir) / "ranks").glob("rank_*.json")):
        out[int(path.stem.split("_")[1])] = json.loads(path.read_text())
    return out


def read_now(run_dir: str | Path) -> Dict[int, dict]:
    """The reports as they are at this moment ({} while a rank is writing one for the first time)."""
    try:
        return read(run_dir)
    except (OSError, ValueError):
        return {}


def ended_well(run_dir: str | Path, world_size: int, reports: Optional[Dict[int, dict]] = None) -> bool:
    """Whether every rank of the current attempt reported exit code 0: the run has Completed, whatever
    the cluster's accounting has caught up with. Never while a checkpoint/requeue is under way."""
    reports = read_now(run_dir) if reports is None else reports
    if len(reports) != world_size or (Path(run_dir) / "checkpoint_requested").exists():
        return False
    attempts = {r.get("attempt") for r in reports.values()}
    return len(attempts) == 1 and all(r.get("exit_code") == 0 for r in reports.values())


def ended_by_themselves(run_dir: str | Path, world_size: int, reports: Optional[Dict[int, dict]] = None) -> bool:
    """Whether every rank of the current attempt exited 0 with no stop signal reaching it while its program ran:
    its work is done, whatever a cancel sent at the same moment did to the job around it."""
    reports = read_now(run_dir) if reports is None else reports
    return ended_well(run_dir, world_size, reports) and not any(r.get("stopped_by_signal") for r in reports.values())


def _failed(report: dict) -> bool:
    return report.get("exit_code") not in (0, None) or bool(report.get("error"))


def any_failed(reports: Dict[int, dict]) -> bool:
    """Whether a rank has reported a non-zero exit or an error."""
    return any(_failed(r) for r in reports.values())


def span(reports: Dict[int, dict]) -> Tuple[Optional[float], Optional[float]]:
    """(first rank's start, last rank's end) as the ranks' own clocks recorded them."""
    starts = [r["started"] for r in reports.values() if r.get("started")]
    ends = [r["ended"] for r in reports.values() if r.get("ended")]
    return (min(starts) if starts else None), (max(ends) if ends and len(ends) == len(reports) else None)


def copy_to_record(record: RunRecord) -> Dict[int, dict]:
    """Each rank's report (exit code, node, devices, attempt, pid) into run.json; returns the reports."""
    reports = read(record.dir)
    for rank, data in reports.items():
        record.set_rank(rank, **{k: data.get(k) for k in ("exit_code", "host", "attempt", "pid", "devices", "stopped_by_signal")
                                 if k in data})
    return reports


def failure(record: RunRecord) -> Tuple[Optional[int], Optional[str]]:
    """(failed rank, message with its log tail) from the reports, and copy them into run.json."""
    reports = copy_to_record(record)
    failed = sorted(r for r, d in reports.items() if _failed(d))
    if not failed:
        return None, None
    # A rank that failed on its own exits with a positive code; the ones stopped after it were killed. A
    # peer can also fail on its own once the first is gone (Horovod raises in a collective whose peer left),
    # so of several the one that ended first is the cause.
    positive = [r for r in failed if (reports[r].get("exit_code") or 0) > 0]
    first = min(positive, key=lambda r: (reports[r].get("ended") or float("inf"), r)) if positive else failed[0]
    info = reports[first]
    reason = info.get("error") or f"rank {first} {describe_exit(info['exit_code'])}"
    log_tail = tail(record.log_path(first))
    return first, (f"{reason}; last lines of {record.log_path(first)}:\n{log_tail}" if log_tail else reason)
