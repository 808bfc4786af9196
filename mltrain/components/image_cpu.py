"""Train PyTorch Model's CPU input path (`trainer.input=cpu`): one image at a time in the loader's workers, from
its file to a uint8 (3, size, size) tensor; the batch is made float and normalised on the device
(mltrain.components.image_input).

Where the time goes, and so how this is built (an ImageNet-sized JPEG, 400x350 and 108 KB, one core of the
build machine): libjpeg-turbo's decode takes 1.3 ms whichever library calls it; torchvision's reference recipe
then spends 0.7 ms in PIL's resampling of the crop, 0.15 ms flipping a PIL image and about 0.5 ms in ToTensor and
Normalize, 2.7 ms in all. Here:

- The crop is drawn on the file's full size first (the header gives it), with the same random draws as
  torchvision's RandomResizedCrop, and the JPEG is decoded at the largest DCT reduction that still leaves the
  crop the output's pixels (libjpeg's scaling, PIL's `Image.draft`: 1/2, 1/4 or 1/8 of each side). Validation's
  resize and an attached transformation that starts with a Resize decode reduced the same way.
- A JPEG with no reduction to take is decoded by torchvision (`decode_jpeg`, the same libjpeg-turbo) straight into
  a tensor: from PIL, handing the pixels over costs 0.36 ms more (PIL keeps 4 bytes a pixel and repacks them).
- The crop is resampled by torch's antialiased bilinear interpolation on uint8 in channels-last order (0.17 ms;
  within 0.1 of 255 of PIL's bilinear on average), and flipped as a tensor.
- The image stays uint8 (a quarter of float32's bytes to hand to the main process) and is normalised per batch.

Other formats, CMYK and anything torchvision refuses go through PIL; an unreadable file is named
(InvalidDatasetError) whichever decoder found it out. An attached transformation runs as Init Image
Transformation built it (torchvision transforms.v2 on the PIL image).
"""
from __future__ import annotations

import math
from typing import BinaryIO, List, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, UnidentifiedImageError
from torch.utils.data import Dataset
from torchvision.io import ImageReadMode, decode_jpeg

from mltrain.components.crops import crop_params, flip
from mltrain.components.image_augment import Augmentation, pipeline, unreadable


def draft(image: Image.Image, width: int, height: int) -> int:
    """Ask a JPEG to decode at the largest DCT reduction whose full image is still at least width x height;
    returns the reduction (1: full size; not a JPEG, or the size does not allow one)."""
    if image.format != "JPEG":
        return 1
    full_w, full_h = image.size
    if min(full_w // max(1, width), full_h // max(1, height)) < 2:
        return 1
    got = image.draft(None, (width, height))
    return round(full_w / got[1][2]) if got else 1


def draft_shorter(image: Image.Image, short: int) -> int:
    """draft() for a resize of the shorter side to `short`: the whole image must stay at least that size."""
    full_w, full_h = image.size
    low = min(full_w, full_h)
    return draft(image, math.ceil(full_w * short / low), math.ceil(full_h * short / low))


def decode_cpu(path: str, aug: Augmentation) -> torch.Tensor:
    """One image through the CPU path: uint8, (3, size, size)."""
    try:
        with open(path, "rb") as f:
            return _augment(f, Image.open(f), aug)
    except (UnidentifiedImageError, OSError) as exc:
        raise unreadable(path, exc) from None


def _pixels(f: BinaryIO, image: Image.Image, reduced: bool) -> torch.Tensor:
    """(3, H, W) uint8 of the opened `image` (at its drafted size when `reduced`), channels-last in memory."""
    if image.format == "JPEG" and not reduced:
        f.seek(0)
        try:
            return decode_jpeg(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8), mode=ImageReadMode.RGB)
        except RuntimeError:  # CMYK, corrupt or truncated: PIL decodes it, or says why it cannot
            f.seek(0)
            image = Image.open(f)
    return torch.from_numpy(np.array(image.convert("RGB"))).permute(2, 0, 1)


def resample(pixels: torch.Tensor, top: int, left: int, height: int, width: int, out: Tuple[int, int]) -> torch.Tensor:
    """The region (top, left, height, width) of (3, H, W) uint8 `pixels` resized to `out` (height, width):
    bilinear, antialiased when it shrinks, as torchvision resizes a tensor, on uint8 in channels-last order
    (torch's vectorised kernel for that layout)."""
    region = pixels[:, top:top + height, left:left + width].unsqueeze(0).contiguous(memory_format=torch.channels_last)
    return F.interpolate(region, size=out, mode="bilinear", antialias=True, align_corners=False)[0]


def _augment(f: BinaryIO, image: Image.Image, aug: Augmentation) -> torch.Tensor:
    full_w, full_h = image.size
    size = aug.size
    if aug.ops is not None:
        short = aug.first_resize()
        if short is not None:
            draft_shorter(image, short)
        return pipeline(aug)(image.convert("RGB")).as_subclass(torch.Tensor)
    if aug.training:
        top, left, h, w = crop_params(image, (aug.min_crop_scale, 1.0))
        s = draft(image, math.ceil(full_w * size / w), math.ceil(full_h * size / h))
        pixels = _pixels(f, image, s > 1)
        if s > 1:  # the same region of the reduced image, to its nearest whole pixels
            img_h, img_w = pixels.shape[-2:]
            y0, x0 = min(round(top / s), img_h - 1), min(round(left / s), img_w - 1)
            y1, x1 = max(y0 + 1, min(round((top + h) / s), img_h)), max(x0 + 1, min(round((left + w) / s), img_w))
            top, left, h, w = y0, x0, y1 - y0, x1 - x0
        out = resample(pixels, top, left, h, w, (size, size))
        return out.flip(-1) if aug.flip and flip() else out
    pixels = _pixels(f, image, draft_shorter(image, aug.resize_to) > 1)
    img_h, img_w = int(pixels.shape[-2]), int(pixels.shape[-1])
    new_h, new_w, top, left = aug.resized_and_crop(img_h, img_w)
    resized = resample(pixels, 0, 0, img_h, img_w, (new_h, new_w))
    return resized[:, top:top + size, left:left + size]


class CpuImages(Dataset):
    """(uint8 image, label) of an ImageFolder's samples through the CPU path."""

    def __init__(self, samples: Sequence[Tuple[str, int]], classes: List[str], aug: Augmentation):
        self.samples, self.classes, self.aug = list(samples), classes, aug
        self.targets = [label for _, label in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        path, label = self.samples[index]
        return decode_cpu(path, self.aug), label
