"""The files between a sweep's or pipeline's detached driver (`python -m mltrain.cli.multirun REQUEST`) and
whoever started it: its typed request (overrides, config folders, config options held in memory) and its
typed outcome ({status, error, exit_code, ...}, written once the command ends). Written and read here only
(the Python API's submit_multirun, a v1 HyperDriveStep's sweep step, the driver itself), standard library only:
a rank program that starts a driver does not import the engine to do it.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from mltrain.base.atomic import atomic_write

REQUEST = "request.json"
OUTCOME = "outcome.json"


def write_request(folder: Path, overrides: Sequence[str], config_dirs: Sequence[str] = (),
                  nodes: Sequence[Any] = ()) -> Path:
    """The driver's request in `folder` (its folder: the outcome and log go there too); `nodes`: ConfigNodes."""
    path = folder / REQUEST
    atomic_write(path, json.dumps({"overrides": list(overrides), "folder": str(folder),
                                   "config_dirs": list(config_dirs),
                                   "nodes": [dataclasses.asdict(node) for node in nodes]}, indent=2) + "\n")
    return path


def read_request(path: Path) -> Dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def write_outcome(folder: Path, outcome: Dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / OUTCOME, json.dumps(outcome, indent=2))


def read_outcome(folder: Path) -> Optional[Dict[str, Any]]:
    """A driver's outcome once written, else None."""
    path = folder / OUTCOME
    if path.is_file():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    return None
