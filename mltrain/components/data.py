"""Image data for the built-in components: torchvision ImageFolder directories and the bundled sample.

The sample is scikit-learn's digits (1,797 real 8x8 scans of handwritten digits, shipped inside the
scikit-learn package), written once into the ImageFolder layout under $MLTRAIN_HOME/data.
"""
from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import Any, List, Optional, Tuple

from mltrain.base.home import mltrain_home
from mltrain.components import checks
from mltrain.components.designer_errors import InvalidDatasetError
from mltrain.components.image_directory import read_meta
from mltrain.components.image_transformation import build as build_transform
from mltrain.components.image_transformation import output_size

SAMPLE_NAME = "digits-v1"
SAMPLE_VAL_FRACTION = 0.2
#: ImageNet statistics, as torchvision's pretrained weights expect.
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def sample_dirs() -> Tuple[Path, Path]:
    """train/ and val/ of the bundled sample, created once (safe when several ranks ask at once)."""
    root = mltrain_home() / "data" / SAMPLE_NAME
    done = root / ".complete"
    if done.is_file():
        return root / "train", root / "val"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{SAMPLE_NAME}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            _write_sample(root)
    return root / "train", root / "val"


def _write_sample(root: Path) -> None:
    import numpy as np  # heavy
    from PIL import Image  # heavy
    from sklearn.datasets import load_digits  # heavy

    tmp = root.with_name(root.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    digits = load_digits()
    rng = np.random.default_rng(0)
    for label in range(10):
        idx = np.flatnonzero(digits.target == label)
        rng.shuffle(idx)
        n_val = int(round(len(idx) * SAMPLE_VAL_FRACTION))
        for split, chosen in (("val", idx[:n_val]), ("train", idx[n_val:])):
            out = tmp / split / str(label)
            out.mkdir(parents=True, exist_ok=True)
            for i in chosen:
                pixels = (digits.images[i] * (255.0 / 16.0)).clip(0, 255).astype("uint8")
                Image.fromarray(pixels, mode="L").save(out / f"{i:04d}.png")
    (tmp / ".complete").write_text("ok\n")
    shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)


def resolve_dirs(cfg: Any) -> Tuple[Path, Path]:
    if cfg.data.kind == "sample":
        return sample_dirs()
    return Path(cfg.data.train_dir).expanduser(), Path(cfg.data.val_dir).expanduser()


def attached_transform(directory: Any) -> Optional[List[list]]:
    """The operations Apply Image Transformation attached to an image directory, if it did."""
    meta = read_meta(directory) if directory else None
    transform = (meta or {}).get("transform")
    return list(transform["transforms"]) if isinstance(transform, dict) else None


def trained_image_size(cfg: Any, ops: Optional[List[list]]) -> int:
    """The size the model sees: the one the attached transformation fixes, else data.image_size."""
    return (output_size(ops) if ops else None) or int(cfg.data.image_size)


def transforms(cfg: Any, train: bool, ops: Optional[List[list]] = None):
    """The images' transform: an attached image transformation (its random operations in training only),
    else the built-in defaults below."""
    if ops is not None:
        return build_transform(ops, training=train, image_size=trained_image_size(cfg, ops))
    from torchvision import transforms as T  # heavy

    size = int(cfg.data.image_size)
    if train:
        steps = [T.RandomResizedCrop(size, scale=(float(cfg.data.min_crop_scale), 1.0))]
        if cfg.data.horizontal_flip:
            steps.append(T.RandomHorizontalFlip())
    else:
        steps = [T.Resize(int(round(size * 256 / 224))), T.CenterCrop(size)]
    return T.Compose(steps + [T.ToTensor(), T.Normalize(MEAN, STD)])


def input_plan(cfg: Any) -> Tuple[Optional[List[list]], Optional[List[list]], int, int]:
    """(training's operations, validation's, training's image size, validation's): what `datasets` applies,
    for the trainer's input paths (mltrain.components.image_input), which apply the same."""
    train_dir, val_dir = resolve_dirs(cfg)
    train_ops = attached_transform(train_dir)
    val_ops = attached_transform(val_dir) or train_ops
    return train_ops, val_ops, trained_image_size(cfg, train_ops), trained_image_size(cfg, val_ops)


def datasets(cfg: Any):
    """(train, val) ImageFolder datasets, with the Designer's label checks."""
    from torchvision.datasets import ImageFolder  # heavy

    train_dir, val_dir = resolve_dirs(cfg)
    checks.check_label_sets(checks.labels_of(str(train_dir), "data.train_dir"), checks.labels_of(str(val_dir), "data.val_dir"))
    train_ops = attached_transform(train_dir)
    # Validation reads its own attached transformation, else training's without its random operations.
    val_ops = attached_transform(val_dir) or train_ops
    train = ImageFolder(str(train_dir), transform=transforms(cfg, train=True, ops=train_ops), loader=load_image)
    val = ImageFolder(str(val_dir), transform=transforms(cfg, train=False, ops=val_ops), loader=load_image)
    return train, val


def load_image(path: str):
    """torchvision's default image loader, with the Designer's error naming a file that is not an image."""
    from PIL import Image, UnidentifiedImageError  # heavy

    try:
        with open(path, "rb") as f:
            return Image.open(f).convert("RGB")
    except (UnidentifiedImageError, OSError) as exc:
        raise InvalidDatasetError(f"'{path}' is not a readable image ({type(exc).__name__}); remove or replace "
                                  "it") from None


def list_images(directory: str) -> List[Path]:
    return sorted(p for p in Path(directory).expanduser().rglob("*") if p.is_file() and checks.is_image(p))
