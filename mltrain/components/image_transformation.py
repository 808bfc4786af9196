"""Image transformations as the Designer specifies them, and the torchvision.transforms.v2 pipeline they build.

Init Image Transformation turns its parameters into an ordered list of operations, as Azure's
ImageTransformationDirectory does (`[["Resize", 256], ["CenterCrop", 224], ["RandomHorizontalFlip"]]`),
written to `image_transformation.json`. Apply Image Transformation attaches that list to an image directory
"For training" (all of it) or "For inference" (the operations that create random samples removed, as Azure
removes them: random resized crop, random crop, random flips, rotation, affine, grayscale, perspective).
The list is applied when the images are read, so a random operation gives every epoch a fresh sample,
which is what augmentation is for (Azure writes the transformed images once).

No torch at import: the driver reads and writes these files; `build` imports torchvision when called.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import ConfigError
from mltrain.components.designer_errors import DesignerError

SPEC_FILE = "image_transformation.json"
FORMAT = "mltrain.image_transformation"
#: ImageNet statistics, as torchvision's pretrained weights expect (the trainer's default normalisation).
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

#: Init Image Transformation's parameters, in Azure's order: (switch, operation, size parameter or None).
PARAMETERS = (
    ("resize", "Resize", "size"),
    ("center_crop", "CenterCrop", "crop_size"),
    ("pad", "Pad", "padding"),
    ("color_jitter", "ColorJitter", None),
    ("grayscale", "Grayscale", None),
    ("random_resized_crop", "RandomResizedCrop", "random_resized_crop_size"),
    ("random_crop", "RandomCrop", "random_crop_size"),
    ("random_horizontal_flip", "RandomHorizontalFlip", None),
    ("random_vertical_flip", "RandomVerticalFlip", None),
    ("random_rotation", "RandomRotation", "random_rotation_degrees"),
    ("random_affine", "RandomAffine", "random_affine_degrees"),
    ("random_grayscale", "RandomGrayscale", None),
    ("random_perspective", "RandomPerspective", None),
)
#: Operations that draw a random sample; dropped "For inference". Color jitter is random too: Azure's own
#: ColorJitter has no ranges and changes nothing, so it never needed dropping; with real ranges it does.
RANDOM_OPS = {"RandomResizedCrop", "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation",
              "RandomAffine", "RandomGrayscale", "RandomPerspective", "ColorJitter"}
#: Operations whose output has one fixed height and width, so that images of any size batch together.
FIXED_SIZE_OPS = ("CenterCrop", "RandomCrop", "RandomResizedCrop")
#: Apply Image Transformation's Mode, as Azure spells it, and the short forms mltrain also takes.
MODES = {"For training": "training", "For inference": "inference", "For testing": "inference",
         "training": "training", "inference": "inference"}


class InvalidTransformationDirectoryError(DesignerError):
    """Azure's error for a transformation input that Init Image Transformation did not write."""


def from_parameters(values: Dict[str, Any]) -> List[list]:
    """The operation list of Init Image Transformation's parameters (switches and their sizes)."""
    ops: List[list] = []
    for switch, op, size in PARAMETERS:
        if values.get(switch):
            ops.append([op, int(values[size])] if size else [op])
    return ops


def check_parameters(values: Dict[str, Any], prefix: str = "job.") -> None:
    for switch, _op, size in PARAMETERS:
        if size and values.get(switch):
            value = values.get(size)
            low = 0 if size in ("padding", "random_rotation_degrees", "random_affine_degrees") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(prefix + size, f"must be an integer >= {low} when {switch} is true, got {value!r}")


def write_spec(directory: Path, ops: List[list]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write(directory / SPEC_FILE, json.dumps({"format": FORMAT, "version": 1, "transforms": ops}, indent=2) + "\n")


def read_spec(path: Any, key: str) -> List[list]:
    """The operations of a transformation written by Init Image Transformation (its folder or its file)."""
    where = Path(str(path)).expanduser()
    file = where / SPEC_FILE if where.is_dir() else where
    try:
        spec = json.loads(file.read_text())
    except (OSError, ValueError):
        raise InvalidTransformationDirectoryError(
            f"'{where}' ({key}) is not an image transformation written by Init Image Transformation "
            f"(no readable {SPEC_FILE})") from None
    ops = spec.get("transforms") if isinstance(spec, dict) and spec.get("format") == FORMAT else None
    if not isinstance(ops, list) or not all(isinstance(o, list) and o and o[0] in _BUILDERS for o in ops):
        raise InvalidTransformationDirectoryError(f"'{file}' ({key}) does not list known operations "
                                                  f"({', '.join(_BUILDERS)})")
    return ops


def for_mode(ops: Sequence[list], mode: str) -> List[list]:
    return [list(o) for o in ops if MODES[mode] == "training" or o[0] not in RANDOM_OPS]


def output_size(ops: Sequence[list]) -> Optional[int]:
    """The height and width every image has after the operations, when one of them fixes it."""
    sizes = [int(o[1]) for o in ops if o[0] in FIXED_SIZE_OPS]
    return sizes[-1] if sizes else None


# ------------------------------------------------------------------------------ torchvision (ranks)
def _builders() -> Dict[str, Any]:
    from torchvision.transforms import v2  # heavy

    return {
        "Resize": lambda size: v2.Resize(size, antialias=True),
        "CenterCrop": v2.CenterCrop,
        "Pad": v2.Pad,
        # brightness, contrast and saturation, as Azure's documentation describes the operation
        "ColorJitter": lambda: v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
        # three channels: the models take RGB input
        "Grayscale": lambda: v2.Grayscale(num_output_channels=3),
        "RandomResizedCrop": lambda size: v2.RandomResizedCrop(size, antialias=True),
        "RandomCrop": lambda size: v2.RandomCrop(size, pad_if_needed=True),
        "RandomHorizontalFlip": v2.RandomHorizontalFlip,
        "RandomVerticalFlip": v2.RandomVerticalFlip,
        "RandomRotation": v2.RandomRotation,
        "RandomAffine": v2.RandomAffine,
        "RandomGrayscale": v2.RandomGrayscale,
        "RandomPerspective": v2.RandomPerspective,
    }


_BUILDERS = [op for _switch, op, _size in PARAMETERS]


def build(ops: Sequence[list], training: bool, image_size: int, normalize: bool = True):
    """A v2 pipeline: PIL image in, normalised float tensor out. Random operations run only in training.
    Without an operation that fixes the size, Resize + CenterCrop to `image_size` are added (images of
    different sizes could not form a batch otherwise). `normalize=False` stops at the uint8 image (the
    trainer's input paths make it float and normalise it on the device: mltrain.components.image_input)."""
    import torch  # heavy
    from torchvision.transforms import v2  # heavy

    chosen = for_mode(ops, "training" if training else "inference")
    builders = _builders()
    steps = [v2.ToImage()]
    steps += [builders[o[0]](*o[1:]) for o in chosen]
    if output_size(chosen) is None:
        steps += [v2.Resize(image_size, antialias=True), v2.CenterCrop(image_size)]
    if normalize:
        steps += [v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
    return v2.Compose(steps)
