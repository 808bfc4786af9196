"""`Run.get_context()` for scripts written for Azure ML; metrics land in the mltrain run."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from mltrain import script_metrics as _metrics


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

    def register_model(self, model_name: str, model_path: str, tags: Optional[Dict[str, str]] = None,
                       properties: Optional[Dict[str, str]] = None, description: Optional[str] = None,
                       **_: Any) -> Any:
        """Register a file or folder of this run ('outputs/model.pt', relative to the run) in mltrain's
        registry. Done through the `mltrain` command of the driver's interpreter, so a job whose own
        environment lacks MLflow registers all the same."""
        import json
        import subprocess
        import sys

        run_dir = os.environ.get("MLTRAIN_RUN_DIR")
        if not run_dir:
            raise RuntimeError("register_model needs a run: start this script with mltrain")
        argv = [os.environ.get("MLTRAIN_PYTHON", sys.executable), "-m", "mltrain", "models", "register", model_name,
                "--run", run_dir, "--path", model_path]
        argv += [a for k, v in (tags or {}).items() for a in ("--tag", f"{k}={v}")]
        argv += [a for k, v in (properties or {}).items() for a in ("--property", f"{k}={v}")]
        argv += ["--description", description] if description else []
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError((done.stderr.strip() or done.stdout.strip()).replace("mltrain: error: ", ""))
        from types import SimpleNamespace

        version = done.stdout.split()[1].rsplit(":", 1)[1]  # "registered NAME:VERSION (...)"
        show = subprocess.run(argv[:3] + ["models", "show", f"{model_name}:{version}", "--json"],
                              capture_output=True, text=True, check=True)
        return SimpleNamespace(**json.loads(show.stdout))

    def complete(self) -> None:
        """Nothing to do: the launcher records the final status."""

    @property
    def parent(self) -> None:
        return None
