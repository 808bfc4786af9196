"""The registered models' files where a scoring script expects them: Azure's layout under AZUREML_MODEL_DIR.

One model: AZUREML_MODEL_DIR is azureml-models/<name>/<version>, holding the registered file or folder under its
own name (a model registered from outputs/model.pt is $AZUREML_MODEL_DIR/model.pt). Several: AZUREML_MODEL_DIR is
azureml-models itself (Azure's rule for several). The files are hard links to the registry's copy (a registered
version's files never change), copied only where the registry is on another filesystem. Not symbolic links: a
path through one is refused by MLflow's loader ("outside the artifact directory"), and a scoring script that
walks its model folder would not enter one.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Dict, List


def file_name(model: Any) -> str:
    """The name the model's files had when registered: the file's name, or the folder's (outputs/model -> model)."""
    source = Path(str(model.source))
    if source.is_file():
        return source.name
    return Path(str(model.model_path or model.name)).name or str(model.name)


def describe(model: Any) -> Dict[str, Any]:
    return {"name": model.name, "version": int(model.version), "source": str(model.source), "file": file_name(model)}


def is_mlflow(model: Any) -> bool:
    source = Path(str(model.source))
    return source.is_dir() and any(source.rglob("MLmodel"))


def _place(source: Path, target: Path) -> None:
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    for file in files:
        out = target if source.is_file() else target / file.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            continue
        try:
            os.link(file, out)
        except OSError:  # another filesystem (or one without hard links)
            shutil.copy2(file, out)


def lay_out(root: Path, models: List[Any]) -> Path:
    """Link each model's files into root in Azure's layout; returns what AZUREML_MODEL_DIR should be."""
    root.mkdir(parents=True, exist_ok=True)
    for model in models:
        folder = root / str(model.name) / str(model.version)
        folder.mkdir(parents=True, exist_ok=True)
        _place(Path(str(model.source)), folder / file_name(model))
    if len(models) == 1:
        return root / str(models[0].name) / str(models[0].version)
    return root
