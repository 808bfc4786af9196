"""Checks of a built-in component's inputs, run by the driver before anything is queued.

No torch or torchvision here (the CLI must stay light); the ranks repeat the same checks through
torchvision's own ImageFolder when they load the data.
"""
from __future__ import annotations

import json
import os
from contextvars import ContextVar
from pathlib import Path
from typing import Any, List

from mltrain.base.errors import ConfigError
from mltrain.components.designer_errors import InvalidDatasetError, InvalidModelDirectoryError, NotLabeledDatasetError
from mltrain.components.onnx_export import INSTALL, OPSETS, missing

#: torchvision.datasets.folder.IMG_EXTENSIONS, copied so the driver need not import torchvision.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
#: The torchvision classification builders the `model` group offers.
MODELS = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d", "resnext101_32x8d",
    "wide_resnet50_2", "wide_resnet101_2", "densenet121", "densenet161", "densenet169", "densenet201",
)
SPEC_FILE = "model_spec.json"
#: The metadata file of an image directory (mltrain.components.image_directory), read here without importing it.
IMAGE_DIRECTORY_META = "image_directory.json"
WEIGHTS_FILE = "weights.pt"


#: Folders an upstream pipeline step will write: they do not exist yet when a step is frozen, so the
#: checks of what is in them are left to the ranks, which repeat them through torchvision.
PRODUCED_LATER: ContextVar[tuple] = ContextVar("produced_later", default=())


def later(path: Any) -> bool:
    text = str(Path(str(path)).expanduser()) if path else ""
    return bool(text) and any(text == d or text.startswith(d + "/") for d in PRODUCED_LATER.get())


def is_image(path: Path) -> bool:
    return path.suffix.lower() in IMG_EXTENSIONS


def labels_of(directory: str, key: str) -> List[str]:
    """Label folders of an ImageFolder directory, each holding at least one image."""
    if directory is None:
        raise ConfigError(key, f"a value is required (set {key}=...)")
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise ConfigError(key, f"directory '{root}' does not exist")
    if _unlabelled(root):
        raise NotLabeledDatasetError(f"'{root}' ({key}) is an unlabelled image directory (Convert to Image Directory "
                                     "found no label folders in its input); training needs one folder per label")
    labels = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not labels:
        raise NotLabeledDatasetError(f"'{root}' ({key}) has no label folders; expected one folder per label")
    for label in labels:
        if not any(is_image(f) for f in (root / label).rglob("*") if f.is_file()):
            raise NotLabeledDatasetError(f"label folder '{root / label}' ({key}) holds no images ({', '.join(IMG_EXTENSIONS)})")
    return labels


def _unlabelled(root: Path) -> bool:
    """Whether Convert to Image Directory marked the directory unlabelled (mltrain.components.image_directory)."""
    try:
        meta = json.loads((root / IMAGE_DIRECTORY_META).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("labelled") is False


def check_label_sets(train: List[str], val: List[str]) -> None:
    if train != val:
        only_train = sorted(set(train) - set(val))
        only_val = sorted(set(val) - set(train))
        raise InvalidDatasetError(
            f"training and validation label sets differ (only in training: {only_train or '-'}; "
            f"only in validation: {only_val or '-'})"
        )


def read_model_spec(directory: str, key: str, trained: bool = False) -> dict:
    """A model directory: model_spec.json naming a known architecture (+ weights.pt once trained)."""
    root = Path(directory).expanduser()
    spec_path = root / SPEC_FILE
    if not root.is_dir() or not spec_path.is_file():
        raise InvalidModelDirectoryError(f"'{root}' ({key}) is not a model directory: no {SPEC_FILE}")
    try:
        spec = json.loads(spec_path.read_text())
    except (OSError, ValueError) as exc:
        raise InvalidModelDirectoryError(f"'{spec_path}' ({key}) is not valid JSON: {exc}") from None
    if not isinstance(spec, dict) or spec.get("name") not in MODELS:
        raise InvalidModelDirectoryError(
            f"'{spec_path}' ({key}) does not name a supported model (allowed: {', '.join(MODELS)})")
    if trained and not (root / WEIGHTS_FILE).is_file():
        raise InvalidModelDirectoryError(f"'{root}' ({key}) is an untrained model directory: no {WEIGHTS_FILE}")
    if trained and not spec.get("class_names"):
        raise InvalidModelDirectoryError(f"'{spec_path}' ({key}) lists no class_names")
    return spec


RUNTIMES = ("pytorch", "onnxruntime")


def _require_onnx(key: str) -> None:
    """The ranks' interpreter is this one unless an environment is built; then the ranks say it themselves."""
    lacking = missing()
    if lacking:
        raise ConfigError(key, f"ONNX needs {', '.join(lacking)}: {INSTALL}")


def validate_train(cfg: Any) -> None:
    """Train PyTorch Model's inputs: the model, its weights, the image directories' labels, ONNX."""
    if cfg.job.untrained_model_dir:
        read_model_spec(cfg.job.untrained_model_dir, "job.untrained_model_dir")
    elif cfg.model.name not in MODELS:
        raise ConfigError("model.name", f"'{cfg.model.name}' is not supported", MODELS)
    if cfg.model.weights and not Path(cfg.model.weights).expanduser().is_file():
        raise ConfigError("model.weights", f"file '{cfg.model.weights}' does not exist")
    if cfg.data.kind == "image_directory":
        found = [None if later(d) else labels_of(d, key)
                 for d, key in ((cfg.data.train_dir, "data.train_dir"), (cfg.data.val_dir, "data.val_dir"))]
        if None not in found:
            check_label_sets(*found)
    _check_gpu_input(cfg)
    if cfg.trainer.export_onnx:
        low, high = OPSETS
        if not low <= int(cfg.trainer.onnx_opset) <= high:  # refused before training, not found after it
            raise ConfigError("trainer.onnx_opset", f"{cfg.trainer.onnx_opset} is outside what torch's ONNX exporter "
                                                    f"writes: {low} to {high}")
        _require_onnx("trainer.export_onnx")


#: CUDA_VISIBLE_DEVICES values that hide every device (mltrain.backends.local.gpus.HIDDEN).
HIDDEN_DEVICES = ("", "-1", "none", "NoDevFiles")


def _gpus_here() -> int:
    """GPUs a process started here could use: the NVIDIA driver's, unless CUDA_VISIBLE_DEVICES hides them all."""
    try:
        driver = len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0
    return 0 if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in HIDDEN_DEVICES else driver


def _no_gpu_reason(cfg: Any) -> str:
    """Why the job's ranks will have no GPU, as far as the driver can tell from the compute's GPU keys before
    anything starts (its backend refuses a request it cannot meet); "" when they may have one."""
    if str(cfg.distribution.get("backend")) == "gloo" and str(cfg.distribution.kind) != "none":
        return "distribution.backend=gloo keeps the ranks on the CPU"
    compute = cfg.compute
    if compute.get("gpus") == 0:
        return "compute.gpus=0 hides every device"
    extra = {str(k).replace("-", "_"): v for k, v in (compute.get("additional_parameters") or {}).items()}
    asked = any(isinstance(v, int) and v > 0 for v in (compute.get("gpus"), compute.get("gpus_per_node"),
                                                          compute.get("gpus_per_task"), extra.get("gpus"),
                                                          extra.get("gpus_per_node"), extra.get("gpus_per_task")))
    if not asked and "gpu" not in str(extra.get("gres") or "") and not _gpus_here():
        return ("the job asks for none (compute.gpus, compute.gpus_per_node, compute.gpus_per_task) and this machine "
                "has none (no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them)")
    return ""


def _check_gpu_input(cfg: Any) -> None:
    """trainer.input=gpu decodes on the GPU: a job whose ranks will have none is refused before it is queued."""
    if str(cfg.trainer.get("input", "auto")) != "gpu":
        return
    reason = _no_gpu_reason(cfg)
    if reason:
        raise ConfigError("trainer.input", f"gpu decodes the images on a GPU, and {reason}", ("auto", "cpu"))


def validate_score(cfg: Any) -> None:
    """Score Image Model's inputs: the runtime, the trained model directory, the images."""
    if cfg.job.runtime not in RUNTIMES:
        raise ConfigError("job.runtime", f"'{cfg.job.runtime}' is not a runtime", RUNTIMES)
    if cfg.job.runtime == "onnxruntime":
        _require_onnx("job.runtime")
    if not later(cfg.job.model_dir):
        read_model_spec(cfg.job.model_dir, "job.model_dir", trained=True)
        if cfg.job.runtime == "onnxruntime" and not (Path(cfg.job.model_dir).expanduser() / "model.onnx").is_file():
            raise ConfigError("job.runtime", f"'{cfg.job.model_dir}' has no model.onnx (train it with "
                              "trainer.export_onnx=true)")
    if later(cfg.job.image_dir):
        return
    root = Path(cfg.job.image_dir).expanduser()
    if not root.is_dir():
        raise ConfigError("job.image_dir", f"directory '{root}' does not exist")
    if not any(is_image(f) for f in root.rglob("*") if f.is_file()):
        raise ConfigError("job.image_dir", f"'{root}' holds no images ({', '.join(IMG_EXTENSIONS)})")
