"""What every scenario shares: its files, its command, its moments, and the invariants checked after a trial.

A scenario says which faults apply to it, what the user does after each (`recover`), and what must then hold
(`check`, on top of the invariants every trial checks: `common_violations`).
"""
from __future__ import annotations

import re
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import ClassVar, Dict, List, Optional, Tuple

from .world import Done, Trial

#: Written into every unit's script: a unit's work is done when its marker exists (written whole, then renamed).
MARK = '''
import os as _os, time as _time
def mark(unit):
    d = {markers!r}
    tmp = _os.path.join(d, ".%s.%d" % (unit, _os.getpid()))
    open(tmp, "w").close()
    _os.rename(tmp, _os.path.join(d, "%s.%d.%d" % (unit, _os.getpid(), _time.time_ns())))
'''


class Scenario:
    name: ClassVar[str] = ""
    #: The faults that apply; a trial draws one.
    faults: ClassVar[Tuple[str, ...]] = ()
    #: "" (this machine), "slurm" (the one-node test cluster) or "slurm2" (the two-node one).
    needs: ClassVar[str] = ""
    #: Units of work the scenario does (markers expected), and about how long one takes (s): moments are drawn
    #: as "after the k-th marker (k < units), plus a delay below unit_s".
    units: ClassVar[int] = 1
    unit_s: ClassVar[float] = 1.0
    #: How long the foreground command may take, undisturbed.
    limit_s: ClassVar[float] = 120.0
    #: How often the scenario is drawn against the others (a slow one, such as a lost node's, less often).
    weight: ClassVar[int] = 4

    def __init__(self, trial: Trial):
        self.t = trial
        self.proc: Optional[subprocess.Popen] = None
        self.notes: List[str] = []

    # ------------------------------------------------------------------ the scenario's own parts
    def write(self, name: str, text: str) -> Path:
        path = self.t.project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MARK.format(markers=str(self.t.markers)) + text if name.endswith(".py") else text)
        return path

    def setup(self) -> None:
        raise NotImplementedError

    def start(self) -> subprocess.Popen:
        raise NotImplementedError

    def recover(self, fault: str) -> None:
        """What a user does after the fault (the foreground command has ended or was left to end)."""

    def check(self, fault: str) -> List[str]:
        return []

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        """unit -> (fewest, most) markers it may have after recovery; (1, 1) is exactly once."""
        return {}

    # ------------------------------------------------------------------ a scenario of one run (run.id=...)
    def run_record(self, run_id: str) -> Optional[dict]:
        return next((r for r in self.t.run_records() if r.get("id") == run_id), None)

    def resume_run(self, run_id: str) -> None:
        """The user's recovery of one run: once the command has ended, `runs resume` unless it Completed (or the
        command again, when the fault came before the run was made)."""
        self.rc = self.wait_foreground()
        rec = self.run_record(run_id)
        if rec is None:
            self.notes.append("no run record was made before the fault: the user runs it again")
            self.start()
            self.rc = self.wait_foreground()
        else:
            self.wait_or_resume(run_id, rec.get("status"))

    def wait_or_resume(self, run_id: str, status: Optional[str]) -> None:
        """A run (or pipeline) still under way without its driver (its jobs run on in Slurm) is followed to its end,
        as `runs resume` itself advises; one that ended short of Completed is resumed."""
        if status not in ("Completed", "Failed", "Canceled"):
            self.t.mltrain("runs", "wait", run_id, "--timeout", str(int(self.limit_s)), timeout=self.limit_s + 30)
            status = (self.run_record(run_id) or {}).get("status")
        if status != "Completed":
            done = self.t.mltrain("runs", "resume", run_id, timeout=self.limit_s)
            if done.rc != 0:
                self.notes.append(f"runs resume exited {done.rc}: {(done.err or done.out).strip()[-300:]}")

    # ------------------------------------------------------------------ shared checks
    def wait_foreground(self, limit: Optional[float] = None) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=limit or self.limit_s)
        except subprocess.TimeoutExpired:
            self.notes.append(f"the foreground command did not end within {limit or self.limit_s:.0f} s")
            self.proc.kill()
            return self.proc.wait()

    def unit_violations(self, fault: str) -> List[str]:
        counts = Counter(self.t.marker_names())
        out = []
        for unit, (low, high) in self.expected_units(fault).items():
            if not low <= counts.get(unit, 0) <= high:
                seen = counts.get(unit, 0)
                out.append(f"exactly-once: {unit} did its work {seen} time(s), expected "
                           + (f"{low}" if low == high else f"{low} to {high}"))
        for unit in set(counts) - set(self.expected_units(fault)):
            out.append(f"exactly-once: unexpected unit {unit} ({counts[unit]} time(s))")
        return out

    def metric_violations(self, record: dict, name: str, steps: int) -> List[str]:
        """A Completed run holds metric `name` once at each step 1..steps in metrics.jsonl."""
        from mltrain.runs.metrics import read_metrics  # what `runs show`, Run.get_metrics and the sweeps read

        path = Path(record.get("run_dir") or self.t.home / "runs" / record["id"]) / "metrics.jsonl"
        seen: Counter = Counter()
        try:
            found = read_metrics(path)
        except ValueError as e:
            return [f"metrics: {record['id']}: metrics.jsonl cannot be read: {e}"]
        for m in found:
            if m.get("name") == name:
                seen[m.get("step")] += 1
        want = set(range(1, steps + 1))
        lost = sorted(want - set(seen))
        doubled = sorted(s for s, n in seen.items() if n > 1)
        out = []
        if lost:
            out.append(f"metrics: {record['id']}: '{name}' lost at steps {lost}")
        if doubled:
            out.append(f"metrics: {record['id']}: '{name}' doubled at steps {doubled}")
        return out


def runs_list_violations(t: Trial) -> List[str]:
    """`mltrain runs list` names every run folder with the status its run.json holds."""
    done: Done = t.mltrain("runs", "list", "--limit", "100000", timeout=120)
    if done.rc != 0:
        return [f"runs list: exit {done.rc}: {done.err.strip()[-200:]}"]
    listed: Dict[str, str] = {}
    for line in done.out.splitlines():
        words = line.split()
        if len(words) >= 2 and not line.startswith(("RUN ", " ")):
            listed[words[0]] = words[1]
    out = []
    for r in t.run_records():
        rid, status = r.get("id", "?"), r.get("status", "?")
        if rid not in listed:
            out.append(f"runs list: {rid} ({status}) is not listed")
        elif listed[rid] != status:
            out.append(f"runs list: {rid} listed {listed[rid]}, run.json says {status}")
    return out


def leftover_violations(t: Trial, allowed: Optional[List[int]] = None, settle_s: float = 10.0) -> List[str]:
    """No process of the trial left (beyond `allowed`), no Slurm job of it queued or running."""
    deadline = time.monotonic() + settle_s
    while True:
        left = [p for p in t.processes() if p not in (allowed or [])]
        jobs = t.slurm_jobs()
        if (not left and not jobs) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    out = []
    if left:
        out.append("processes left: " + "; ".join(t.describe(left))[:400])
    if jobs:
        out.append("Slurm jobs left: " + ", ".join(jobs))
    return out


#: A frame of mltrain's own code in a traceback: a fault is said in one line, never with mltrain's internals.
INTERNAL_FRAME = re.compile(r'File "[^"]*/site-packages/mltrain/[^"]*", line \d+')


def traceback_violations(t: Trial) -> List[str]:
    """Neither the foreground command nor the recovery's commands printed a traceback from mltrain's internals."""
    out = []
    texts = [("the command", (t.root / "foreground.out").read_text(errors="replace")
              if (t.root / "foreground.out").exists() else "")] + [("a recovery command", x) for x in t.said]
    for who, text in texts:
        if "Traceback (most recent call last)" in text and INTERNAL_FRAME.search(text):
            last = [line for line in text.splitlines() if line.strip()][-1:]
            out.append(f"one line: {who} printed a traceback from mltrain's internals, ending {last}")
    return out


def mlflow_violations(t: Trial) -> List[str]:
    """MLflow's own client opens the trial's store (when the trial made one) and lists its runs."""
    db = t.home / "mlflow.db"
    if not db.exists():
        return []
    code = ("import sys; from mlflow.tracking import MlflowClient; c = MlflowClient(tracking_uri=sys.argv[1]); "
            "ex = c.search_experiments(); print(sum(len(c.search_runs([e.experiment_id])) for e in ex))")
    p = subprocess.run([_python(), "-c", code, f"sqlite:///{db}"], capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        return [f"mlflow: its client could not open the store: {p.stderr.strip().splitlines()[-1:]}"]
    return []


def _python() -> str:
    import sys
    return sys.executable


def status_violation(what: str, got: Optional[str], want: str) -> List[str]:
    return [] if got == want else [f"status: {what} is {got}, expected {want}"]


def error_has(record: dict, pattern: str) -> bool:
    return bool(re.search(pattern, record.get("error") or ""))
