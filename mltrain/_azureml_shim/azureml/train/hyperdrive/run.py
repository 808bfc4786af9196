"""HyperDriveRun: the sweep's handle, answered from its sweep.json (members, their best values, who
was stopped by the policy and why) and its driver's typed outcome."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from azureml.core.run import Run
from azureml.exceptions import ActivityFailedException


class HyperDriveRun(Run):
    def __init__(self, experiment: Any, run_id: str, hyperdrive_config: Any = None, _sweep_dir: Optional[str] = None,
                 _driver: Any = None, _names: Optional[Dict[str, str]] = None, **kwargs: Any) -> None:
        from mltrain.base.home import mltrain_home

        self.experiment = experiment
        self._handle = None
        self._in_rank = False
        self._sweep_dir = Path(_sweep_dir) if _sweep_dir else mltrain_home() / "runs" / "_sweeps" / run_id
        self._dir = self._sweep_dir
        self._driver = _driver
        self._names = dict(_names or {})
        self.id = run_id
        self._tags: Dict[str, str] = {}

    # ------------------------------------------------------------------ state
    def _doc(self) -> Optional[Dict[str, Any]]:
        path = self._sweep_dir / "sweep.json"
        try:
            return dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None

    def _outcome(self) -> Optional[Dict[str, Any]]:
        if self._driver is not None:
            outcome: Optional[Dict[str, Any]] = self._driver.outcome()
            return outcome
        return None

    def get_status(self) -> str:
        outcome = self._outcome()
        if outcome is not None:
            return str(outcome["status"])
        if self._driver is not None:  # its driver is ours and still runs
            return "Running"
        return str((self._doc() or {}).get("status") or "Running")

    def wait_for_completion(self, show_output: bool = False, wait_post_processing: bool = False,
                            raise_on_error: bool = True) -> Dict[str, Any]:
        from mltrain.runs.waiting import wait_until  # submission

        if self._driver is not None:
            self._driver.wait(show_output)
        else:  # a sweep found again later: its sweep.json says when it ended
            wait_until(lambda: (self._doc() or {}).get("status") in ("Completed", "Failed", "Canceled"), poll=0.2)
        outcome = self._outcome() or {}
        status = self.get_status()
        if raise_on_error and status in ("Failed", "Canceled"):
            raise ActivityFailedException(f"HyperDrive run {self.id} {status}: {outcome.get('error') or ''}".strip())
        return self.get_details()

    def get_details(self) -> Dict[str, Any]:
        doc = self._doc() or {}
        return {"runId": self.id, "status": self.get_status(), "target": "hyperdrive",
                "properties": {"primary_metric_config": json.dumps({"name": doc.get("primary_metric"),
                                                                    "goal": doc.get("goal")}),
                               "best_child_run_id": doc.get("best_run_id"), "sweep_dir": str(self._sweep_dir)},
                "stopped_because": doc.get("stopped_because")}

    def cancel(self) -> None:
        """Stops the sweep's driver, which cancels every member still running."""
        pid = self._driver.process.pid if self._driver is not None else None
        if pid is None or self._driver.process.poll() is not None:
            return
        os.kill(pid, signal.SIGTERM)
        from mltrain.runs.waiting import wait_until  # submission

        wait_until(lambda: self._driver.outcome() is not None, timeout=60, poll=0.1)

    # ------------------------------------------------------------------ children
    def _members(self) -> List[Dict[str, Any]]:
        return list((self._doc() or {}).get("members") or [])

    def _child(self, member: Dict[str, Any]) -> Run:
        from mltrain.python_api.handle import Run as Handle  # submission

        return Run(self.experiment, _handle=Handle(member["run_dir"]))

    def get_children(self, recursive: bool = False, tags: Any = None, properties: Any = None, type: Any = None,
                     status: Any = None, _rehydrate_runs: bool = True) -> Iterator[Run]:
        for member in self._members():
            if member.get("run_dir") and (status is None or member.get("status") == status):
                yield self._child(member)

    def _params(self, member: Dict[str, Any]) -> Dict[str, Any]:
        return {self._names.get(k, k.rsplit(".", 1)[-1]): v for k, v in (member.get("params") or {}).items()}

    def get_hyperparameters(self) -> Dict[str, Dict[str, Any]]:
        return {m["run_id"]: self._params(m) for m in self._members() if m.get("run_id")}

    def get_children_sorted_by_primary_metric(self, top: int = 0, reverse: bool = False,
                                              discard_no_metric: bool = False) -> List[Dict[str, Any]]:
        doc = self._doc() or {}
        sign = -1 if doc.get("goal", "maximize") == "maximize" else 1
        rows = [{"run_id": m.get("run_id"), "hyperparameters": json.dumps(self._params(m)),
                 "best_primary_metric": m.get("best"), "status": m.get("status")} for m in self._members()
                if m.get("run_id")]
        if discard_no_metric:
            rows = [r for r in rows if r["best_primary_metric"] is not None]
        rows.sort(key=lambda r: (r["best_primary_metric"] is None, sign * (r["best_primary_metric"] or 0)))
        if reverse:
            rows.reverse()
        return rows[:top] if top else rows

    def get_best_run_by_primary_metric(self, include_failed: bool = True, include_canceled: bool = True,
                                       include_resume_from_runs: bool = True) -> Optional[Run]:
        allowed = {"Completed"} | ({"Failed"} if include_failed else set()) | ({"Canceled"} if include_canceled
                                                                              else set())
        rows = [r for r in self.get_children_sorted_by_primary_metric(discard_no_metric=True)
                if r["status"] in allowed]
        if not rows:
            return None
        member = next(m for m in self._members() if m.get("run_id") == rows[0]["run_id"])
        return self._child(member)

    def get_metrics(self, name: Optional[str] = None, recursive: bool = False, run_type: Any = None,
                    populate: bool = False) -> Dict[str, Any]:
        return {child.id: child.get_metrics(name) for child in self.get_children()}

    def get_file_names(self) -> List[str]:
        return sorted(p.name for p in self._sweep_dir.iterdir() if p.is_file())

    def __repr__(self) -> str:
        name = getattr(self.experiment, "name", None) or "-"
        return f"Run(Experiment: {name},\nId: {self.id},\nType: hyperdrive,\nStatus: {self.get_status()})"
