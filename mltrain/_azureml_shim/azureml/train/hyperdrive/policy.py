"""Azure's early-termination policies, as mltrain's `sweep.early_termination` (mltrain.sweeps.policies
applies them with Azure's rules)."""
from __future__ import annotations

from typing import Any, Dict, Optional


class EarlyTerminationPolicy:
    def __init__(self, evaluation_interval: int = 1, delay_evaluation: int = 0) -> None:
        self.evaluation_interval = evaluation_interval
        self.delay_evaluation = delay_evaluation

    def to_mltrain(self) -> Dict[str, Any]:
        return {"evaluation_interval": self.evaluation_interval, "delay_evaluation": self.delay_evaluation}


class NoTerminationPolicy(EarlyTerminationPolicy):
    def __init__(self) -> None:
        super().__init__()

    def to_mltrain(self) -> Dict[str, Any]:
        return {"policy": "none"}


class BanditPolicy(EarlyTerminationPolicy):
    def __init__(self, evaluation_interval: int = 1, slack_factor: Optional[float] = None,
                 slack_amount: Optional[float] = None, delay_evaluation: int = 0) -> None:
        super().__init__(evaluation_interval, delay_evaluation)
        self.slack_factor, self.slack_amount = slack_factor, slack_amount

    def to_mltrain(self) -> Dict[str, Any]:
        out = {"policy": "bandit", **super().to_mltrain()}
        if self.slack_factor is not None:
            out["slack_factor"] = float(self.slack_factor)
        if self.slack_amount is not None:
            out["slack_amount"] = float(self.slack_amount)
        return out


class MedianStoppingPolicy(EarlyTerminationPolicy):
    def to_mltrain(self) -> Dict[str, Any]:
        return {"policy": "median_stopping", **super().to_mltrain()}


class TruncationSelectionPolicy(EarlyTerminationPolicy):
    def __init__(self, truncation_percentage: int, evaluation_interval: int = 1, delay_evaluation: int = 0,
                 exclude_finished_jobs: bool = False) -> None:
        super().__init__(evaluation_interval, delay_evaluation)
        self.truncation_percentage = truncation_percentage
        self.exclude_finished_jobs = exclude_finished_jobs

    def to_mltrain(self) -> Dict[str, Any]:
        return {"policy": "truncation_selection", **super().to_mltrain(),
                "truncation_percentage": self.truncation_percentage,
                "exclude_finished_runs": bool(self.exclude_finished_jobs)}
