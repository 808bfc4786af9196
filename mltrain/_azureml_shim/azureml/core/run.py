"""`Run.get_context()` for scripts written for Azure ML; metrics land in the mltrain run."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from mltrain import run as _metrics


class Run:
    """The subset of azureml.core.Run a training script uses: logging metrics and reading them back."""

    def __init__(self) -> None:
        self.id = os.environ.get("MLTRAIN_RUN_ID", "OfflineRun")
        self.tags: Dict[str, str] = {}

    @classmethod
    def get_context(cls, allow_offline: bool = True) -> Run:
        return cls()

    def log(self, name: str, value: Any, description: str = "", step: Optional[int] = None) -> None:
        _metrics.log(name, value, step=step, description=description)

    def log_list(self, name: str, value: List[Any], description: str = "") -> None:
        _metrics.log_list(name, value, description=description)

    def log_row(self, name: str, description: Optional[str] = None, **kwargs: Any) -> None:
        _metrics.log_row(name, description or "", **kwargs)

    def log_table(self, name: str, value: Dict[str, List[Any]], description: str = "") -> None:
        _metrics.log_table(name, value, description=description)

    def get_metrics(self, name: Optional[str] = None, **_: Any) -> Dict[str, Any]:
        return _metrics.get_metrics(name)

    def set_tags(self, tags: Dict[str, str]) -> None:
        self.tags.update(tags)

    def tag(self, key: str, value: str = "") -> None:
        self.tags[key] = value

    def complete(self) -> None:
        """Nothing to do: the launcher records the final status."""

    @property
    def parent(self) -> None:
        return None
