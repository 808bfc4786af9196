"""What one split's images go through on their way to the model, whichever input path decodes them
(mltrain.components.image_cpu, mltrain.components.image_input): the built-in defaults (a random resized crop and
a flip for training; resize and center crop for validation) or the operations Init Image Transformation attached
to the image directory."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple

from mltrain.components import image_transformation
from mltrain.components.designer_errors import InvalidDatasetError


def unreadable(path: str, exc: BaseException) -> InvalidDatasetError:
    return InvalidDatasetError(f"'{path}' is not a readable image ({type(exc).__name__}); remove or replace it")


@dataclass(frozen=True)
class Augmentation:
    """The operations one split's images go through: the built-in defaults (`ops` None) or an attached
    transformation's operations; `training` keeps the random ones."""

    size: int
    training: bool
    min_crop_scale: float = 0.08
    flip: bool = False
    ops: Optional[Tuple[tuple, ...]] = None

    @property
    def resize_to(self) -> int:
        """Validation's shorter side before the center crop (the built-in defaults)."""
        return int(round(self.size * 256 / 224))

    def resized_and_crop(self, height: int, width: int) -> Tuple[int, int, int, int]:
        """Validation's torchvision Resize(resize_to) then CenterCrop(size) on a height x width image: (resized
        height, resized width, top, left), the crop's corner in the resized image."""
        short, long = (height, width) if height <= width else (width, height)
        new_short, new_long = self.resize_to, int(self.resize_to * long / short)
        new_h, new_w = (new_short, new_long) if height <= width else (new_long, new_short)
        return new_h, new_w, int(round((new_h - self.size) / 2.0)), int(round((new_w - self.size) / 2.0))

    def first_resize(self) -> Optional[int]:
        """The shorter side an attached transformation resizes to first, if its first operation is a Resize
        (what allows a reduced decode: nothing before it looks at the full-size pixels)."""
        if self.ops is None:
            return None
        chosen = image_transformation.for_mode([list(o) for o in self.ops], "training" if self.training else "inference")
        if not chosen:  # the pipeline then starts with its own Resize + CenterCrop to `size`
            return self.size
        return int(chosen[0][1]) if chosen[0][0] == "Resize" else None

    def v2_pipeline(self) -> Any:
        """The attached transformation without its final float conversion and normalisation (uint8 out)."""
        assert self.ops is not None
        return image_transformation.build([list(o) for o in self.ops], training=self.training, image_size=self.size,
                                          normalize=False)


def augmentation(cfg: Any, training: bool, ops: Optional[List[list]], size: int) -> Augmentation:
    return Augmentation(size=size, training=training, min_crop_scale=float(cfg.data.get("min_crop_scale", 0.08)),
                        flip=bool(cfg.data.get("horizontal_flip", True)),
                        ops=tuple(tuple(o) for o in ops) if ops is not None else None)


@functools.lru_cache(maxsize=8)
def pipeline(aug: Augmentation) -> Any:
    """aug's attached transformation, built once per process."""
    return aug.v2_pipeline()
