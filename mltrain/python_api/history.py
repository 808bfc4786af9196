"""Run history you can look at: metric curves of several runs in one picture, a table of what differs
between runs, and a run started again from exactly what an earlier one recorded.

`rerun` reproduces: the new run gets the earlier run's frozen config and job, its source snapshot (not
today's source) and its environment spec, and records which run it reproduces. On the CPU with the same
seed the built-in trainer logs the same values.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from mltrain.base.errors import MltrainError
from mltrain.jobspec.job import FrozenJob, new_run_id
from mltrain.launch.orchestrate import create_run, execute
from mltrain.pipelines.reuse import flatten
from mltrain.runs.console import Console
from mltrain.runs.metrics import SYSTEM_PREFIX, last_and_best, read_metrics
from mltrain.runs.record import RunRecord


def _wanted(name: str, metric: Optional[str]) -> bool:
    """`metric` unset: what the run's programs logged (the system/ samples are asked for as `system/`); ending
    with '/': every metric under that prefix; else that metric."""
    if metric is None:
        return not name.startswith(SYSTEM_PREFIX)
    return name.startswith(metric) if metric.endswith("/") else name == metric


def curves(record: RunRecord, metric: Optional[str] = None) -> Dict[str, List[tuple]]:
    """{metric: [(step, value), ...]} of a run's scalar metrics, rank 0's (or the only rank's)."""
    out: Dict[str, List[tuple]] = {}
    for r in read_metrics(record.dir / "metrics.jsonl"):
        value = r.get("value")
        if r.get("kind", "scalar") != "scalar" or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if int(r.get("rank") or 0) != 0 or not _wanted(str(r.get("name")), metric):
            continue
        points = out.setdefault(r["name"], [])
        points.append((r.get("step") if r.get("step") is not None else len(points) + 1, float(value)))
    return out


def plot(records: List[RunRecord], output: Path, metric: Optional[str] = None) -> List[str]:
    """Draw each metric (one panel per metric, one line per run) into a PNG; returns the metrics drawn."""
    data = {r.id: curves(r, metric) for r in records}
    names = sorted({m for c in data.values() for m in c})
    if not names:
        what = f"metric '{metric}'" if metric else "scalar metrics"
        raise MltrainError(f"no {what} in run(s) {', '.join(data)} (see `mltrain runs show`)")
    try:
        import matplotlib  # optional
    except ImportError:
        raise MltrainError("runs plot needs matplotlib: pip install matplotlib (or 'mltrain[sweep]')") from None
    matplotlib.use("Agg")  # headless: no display is needed, none is opened
    import matplotlib.pyplot as plt  # heavy

    cols = min(2, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        for run_id, metrics in data.items():
            if name in metrics:
                xs, ys = zip(*metrics[name])
                ax.plot(xs, ys, marker="o" if len(xs) < 30 else None, label=run_id)
        ax.set_title(name)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    fig.tight_layout()
    output = Path(output)
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file where a folder should be, a read-only place: nothing is drawn
        raise MltrainError(f"-o {output}: cannot create the folder {output.parent} ({blocked(exc)})") from None
    tmp = output.with_name(f".{output.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, output)
    return names


def blocked(exc: OSError) -> str:
    """Why a folder could not be made, in words: mkdir says "File exists" of a file in the way."""
    if exc.filename and Path(exc.filename).exists() and not Path(exc.filename).is_dir():
        return f"{exc.filename} is a file"
    return f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc.strerror)


def flat_config(record: RunRecord) -> Dict[str, Any]:
    return flatten(record.resolved_config())


#: Keys that differ between any two runs and say nothing about them.
SAME_FOR_ALL = ("run.id", "outputs.", "inputs.")


def compare(records: List[RunRecord]) -> Dict[str, Any]:
    """The config keys whose values differ between the runs, and each run's last, min and max metrics."""
    configs = [flat_config(r) for r in records]
    keys = sorted(set().union(*configs))
    differ = {k: [c.get(k, "-") for c in configs] for k in keys
              if not k.startswith(SAME_FOR_ALL) and len({json.dumps(c.get(k, "-"), default=str) for c in configs}) > 1}
    metrics = [last_and_best(read_metrics(r.dir / "metrics.jsonl")) for r in records]
    return {"runs": [r.id for r in records], "status": [r.status for r in records], "params": differ,
            "metrics": {name: [m.get(name) for m in metrics] for name in sorted(set().union(*metrics))}}


def rerun(record: RunRecord, detach: bool = False):
    """A new run from what `record` froze: its job, config, snapshot and environment spec."""
    if not (record.dir / "job.json").is_file():  # a deferred member whose config was refused (launch.deferred)
        raise MltrainError(f"run {record.id} was never made, so there is nothing to run again: {record.error}")
    old = FrozenJob.load(record.dir)
    run_id = new_run_id(old.experiment)
    new_dir = str(Path(old.run_dir).parent / run_id)
    old_dir = old.run_dir

    def moved(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(old_dir, new_dir)
        if isinstance(value, list):
            return [moved(v) for v in value]
        if isinstance(value, dict):
            return {k: moved(v) for k, v in value.items()}
        return value

    snapshot = record.dir / "snapshot"
    config = moved(old.config)
    if isinstance(config.get("run"), dict):
        config["run"] = {**config["run"], "id": run_id}
    job = dataclasses.replace(
        old, run_id=run_id, run_dir=new_dir, argv=moved(old.argv), cwd=moved(old.cwd), env=moved(old.env),
        config=config, detach=detach, sweep_dir=None, sweep_index=None,
        # the ranks run the earlier run's source, whatever the folder it came from holds today
        snapshot_source=str(snapshot) if old.snapshot_source and snapshot.is_dir() else None)
    if old.snapshot_source and not snapshot.is_dir():
        raise MltrainError(f"run {record.id} has no snapshot folder left to run again")
    console = Console()
    new = create_run(job, console)
    new.update(reproduces=record.id)
    console.status(f"reproducing run {record.id}")
    return execute([job], [new], [console])[0]
