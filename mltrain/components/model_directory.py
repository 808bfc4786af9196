"""torchvision classification models for the built-in components, and the Designer's model directory.

A model directory holds model_spec.json (architecture, class names, image size) and, once trained,
weights.pt (the state dict). Without weights.pt it is an *untrained* model directory, which
Train PyTorch Model accepts in place of the `model` group.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.components import checks
from mltrain.components.designer_errors import InvalidModelDirectoryError


def spec_from_config(cfg: Any) -> Dict[str, Any]:
    if cfg.job.get("untrained_model_dir"):
        spec = checks.read_model_spec(cfg.job.untrained_model_dir, "job.untrained_model_dir")
        return {"memory_efficient": False, "pretrained": False, "weights": None, **spec}
    return {"name": str(cfg.model.name), "memory_efficient": bool(cfg.model.memory_efficient),
            "pretrained": bool(cfg.model.pretrained), "weights": cfg.model.weights}


def build(spec: Dict[str, Any], num_classes: int):
    """A torchvision model with its classifier sized to `num_classes`; pretrained weights from disk only."""
    import torch  # heavy
    from torchvision.models import get_model  # heavy

    name = spec["name"]
    kwargs = {"memory_efficient": True} if name.startswith("densenet") and spec.get("memory_efficient") else {}
    if not spec.get("pretrained"):
        return get_model(name, weights=None, num_classes=num_classes, **kwargs)
    model = get_model(name, weights=None, **kwargs)  # ImageNet-shaped, to take the pretrained weights
    state = torch.load(_pretrained_file(name, spec.get("weights")), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    _replace_head(model, num_classes)
    return model


def _pretrained_file(name: str, weights: Optional[str]) -> str:
    if weights:
        return str(Path(weights).expanduser())
    import torch  # heavy
    from torchvision.models import get_model_weights  # heavy

    url = get_model_weights(name).DEFAULT.url
    cached = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url)
    if not cached.is_file():
        raise MltrainError(
            f"model.pretrained: weights for {name} are not in the torch hub cache ({cached}); mltrain never "
            f"downloads at run time: copy {os.path.basename(url)} there or set model.weights=PATH"
        )
    return str(cached)


def _replace_head(model, num_classes: int) -> None:
    import torch.nn as nn  # heavy

    if hasattr(model, "fc"):
        model.fc = nn.Linear(model.fc.in_features, num_classes)
    else:
        model.classifier = nn.Linear(model.classifier.in_features, num_classes)


def save_model_dir(directory: Path, spec: Dict[str, Any], class_names: List[str], image_size: int, state_dict,
                   transform: Optional[List[list]] = None) -> None:
    """Write a trained model directory; weights first, spec last, so a half-written one is not trained."""
    import torch  # heavy

    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{checks.WEIGHTS_FILE}.tmp"
    torch.save(state_dict, tmp)
    os.replace(tmp, directory / checks.WEIGHTS_FILE)
    full = {"name": spec["name"], "memory_efficient": bool(spec.get("memory_efficient")),
            "num_classes": len(class_names), "class_names": list(class_names), "image_size": int(image_size),
            "framework": "torchvision"}
    if transform is not None:  # Apply Image Transformation's operations, for inference
        full["image_transformation"] = transform
    atomic_write(directory / checks.SPEC_FILE, json.dumps(full, indent=2))


def load_model_dir(directory: str, key: str = "job.model_dir"):
    """(model in eval mode, spec) from a trained model directory."""
    import torch  # heavy

    spec = checks.read_model_spec(directory, key, trained=True)
    model = build({**spec, "pretrained": False}, len(spec["class_names"]))
    path = Path(directory).expanduser() / checks.WEIGHTS_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle, zip and torch's own errors alike: the file is not weights
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise InvalidModelDirectoryError(f"'{path}' ({key}) cannot be read as weights: {first}") from None
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0]
        raise InvalidModelDirectoryError(f"weights in '{directory}' do not match its model_spec.json: {first}") from None
    return model.eval(), spec
