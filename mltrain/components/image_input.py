"""How Train PyTorch Model's images get from files to normalised batches on the device (`trainer.input`).

Two paths, one set of augmentations (the built-in defaults, or the operations Init Image Transformation
attached to the image directory, as mltrain.components.data reads them), each deterministic for a seed:

- `cpu`: the loader's workers decode (a JPEG at a reduced size where the output allows it), crop, resample and
  flip one image at a time, and batch uint8 tensors (mltrain.components.image_cpu); the batch is made float
  and normalised on the device (in the main process when training on the CPU).
- `gpu`: the workers only read each file's bytes (one buffer per batch); the main process decodes the batch
  on the GPU with nvJPEG (`torchvision.io.decode_jpeg(device="cuda")`), resamples every image's crop there in
  one call (torchvision's `roi_align`), flips and normalises the batch there. The random draws are the main process's, in
  the same order as on the CPU path (crop, then flip, image by image).

`auto` takes the GPU path when the trainer runs on a GPU and every training and validation image is a JPEG,
else the CPU path. The datasets of other callers (anything that is not an ImageFolder) are used as they are.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import Dataset
from torchvision.io import ImageReadMode, decode_image, decode_jpeg
from torchvision.ops import roi_align

from mltrain.base.errors import ConfigError
from mltrain.components import image_transformation
from mltrain.components.crops import draw_crops
from mltrain.components.image_augment import Augmentation, augmentation, unreadable
from mltrain.components.image_cpu import CpuImages

INPUTS = ("auto", "cpu", "gpu")
JPEG_SUFFIXES = (".jpg", ".jpeg", ".jpe", ".jfif")
#: ImageNet statistics, as torchvision's pretrained weights expect (mltrain.components.data's MEAN, STD).
MEAN, STD = image_transformation.MEAN, image_transformation.STD


# ------------------------------------------------------------------------------ the GPU path
class FileBytes(Dataset):
    """(the file's bytes as a uint8 tensor, label, index): what the GPU path's workers read."""

    def __init__(self, samples: Sequence[Tuple[str, int]], classes: List[str]):
        self.samples, self.classes = list(samples), classes
        self.targets = [label for _, label in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int, int]:
        path, label = self.samples[index]
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise unreadable(path, exc) from None
        return torch.frombuffer(bytearray(data), dtype=torch.uint8), label, index


EncodedBatch = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def collate_bytes(batch: List[Tuple[torch.Tensor, int, int]]) -> EncodedBatch:
    """(every file's bytes end to end, their lengths, labels, indices). One buffer per batch: a worker hands each
    tensor over in a shared-memory file of its own, and 128 of them per batch cost the main process more than the
    GPU's decode of the batch (H200: 1,770 images/s through the loader against 5,070 decoded)."""
    lengths = torch.tensor([len(b[0]) for b in batch], dtype=torch.int64)
    flat = torch.cat([b[0] for b in batch]) if batch else torch.empty(0, dtype=torch.uint8)
    return (flat, lengths, torch.tensor([b[1] for b in batch], dtype=torch.int64),
            torch.tensor([b[2] for b in batch], dtype=torch.int64))


def split_bytes(flat: torch.Tensor, lengths: torch.Tensor) -> List[torch.Tensor]:
    """collate_bytes' buffer back into one tensor per file (views: nothing is copied)."""
    return list(torch.split(flat, lengths.tolist()))


#: Pixels (per channel) of decoded images resampled together: bounds the float copy of a batch of large photographs.
CHUNK_PIXELS = 1 << 24


class DeviceDecoder:
    """A batch of encoded images -> (N, 3, size, size) on `device`, values 0..255 (float for the built-in
    augmentation, uint8 through an attached transformation): decoded there (nvJPEG on a GPU), each image's crop
    resampled to the output size, then the batch flipped. Runs on a CPU device too (the tests' way in).

    The built-in crops are resampled for the whole batch in one call of torchvision's roi_align (bilinear samples,
    as many per output pixel as the crop is larger than the output, averaged: antialiased downscaling): a
    transforms.v2 resized crop per image cost 145 us of the main process's time per image on an H200, 18 ms a
    batch of 128, about what the GPU needs to train ResNet-50 on it."""

    def __init__(self, samples: Sequence[Tuple[str, int]], aug: Augmentation, device: torch.device):
        self.samples, self.aug, self.device = samples, aug, device
        self.pipeline = aug.v2_pipeline() if aug.ops is not None else None

    def decode(self, encoded: List[torch.Tensor], indices: torch.Tensor) -> List[torch.Tensor]:
        try:
            return list(decode_jpeg(encoded, mode=ImageReadMode.RGB, device=self.device))
        except RuntimeError:  # one image nvJPEG refuses (CMYK, not a JPEG after all, corrupt): one by one
            return [self._decode_one(e, int(i)) for e, i in zip(encoded, indices.tolist())]

    def _decode_one(self, encoded: torch.Tensor, index: int) -> torch.Tensor:
        try:
            return decode_jpeg(encoded, mode=ImageReadMode.RGB, device=self.device)
        except RuntimeError:
            pass
        try:  # what nvJPEG does not take, the CPU decodes
            return decode_image(encoded.cpu(), mode=ImageReadMode.RGB).to(self.device)
        except RuntimeError as exc:
            raise unreadable(self.samples[index][0], exc) from None

    def boxes(self, images: List[torch.Tensor]) -> Tuple[List[List[float]], List[bool]]:
        """Each image's region (x1, y1, x2, y2) in its own pixels, and whether it is flipped: the training crops and
        flips drawn for the whole batch at once (draw_crops), or validation's resize-then-center-crop as the region
        of the original it keeps."""
        aug, size = self.aug, self.aug.size
        if aug.training:
            drawn = draw_crops([(int(im.shape[-2]), int(im.shape[-1])) for im in images], (aug.min_crop_scale, 1.0))
            flips = (torch.rand(len(images)) < 0.5).tolist() if aug.flip else [False] * len(images)
            return [[left, top, left + w, top + h] for top, left, h, w in drawn], flips
        boxes: List[List[float]] = []
        flips = []
        for image in images:
            h_img, w_img = int(image.shape[-2]), int(image.shape[-1])
            # torchvision's Resize(shorter side) then CenterCrop(size), mapped back onto the original
            new_h, new_w, top, left = aug.resized_and_crop(h_img, w_img)
            sy, sx = h_img / new_h, w_img / new_w
            boxes.append([left * sx, top * sy, (left + size) * sx, (top + size) * sy])
            flips.append(False)
        return boxes, flips

    def __call__(self, encoded: List[torch.Tensor], indices: torch.Tensor) -> torch.Tensor:
        images = self.decode(encoded, indices)
        if self.pipeline is not None:
            return torch.stack([self.pipeline(image).as_subclass(torch.Tensor) for image in images])
        boxes, flips = self.boxes(images)
        out = torch.cat([self._resample(images[i:j], boxes[i:j]) for i, j in _chunks(images)])
        if any(flips):
            mask = torch.tensor(flips, device=out.device).view(-1, 1, 1, 1)
            out = torch.where(mask, out.flip(-1), out)
        return out

    def _resample(self, images: List[torch.Tensor], boxes: List[List[float]]) -> torch.Tensor:
        h = max(int(im.shape[-2]) for im in images)
        w = max(int(im.shape[-1]) for im in images)
        if all(im.shape[-2:] == (h, w) for im in images):
            canvas = torch.stack(images)
        else:  # one canvas: smaller images padded with their own edge, so samples at an edge blend no black in
            canvas = torch.stack([torch.nn.functional.pad(im.float(), (0, w - im.shape[-1], 0, h - im.shape[-2]),
                                                          mode="replicate") for im in images])
        rois = torch.tensor([[float(n), *box] for n, box in enumerate(boxes)], dtype=torch.float32).to(self.device)
        size = self.aug.size
        return roi_align(canvas.float(), rois, (size, size), spatial_scale=1.0, sampling_ratio=-1, aligned=True)


def _chunks(images: List[torch.Tensor]) -> List[Tuple[int, int]]:
    """[start, end) runs of `images` holding at most CHUNK_PIXELS pixels each (at least one image)."""
    runs, start, total = [], 0, 0
    for n, image in enumerate(images):
        pixels = int(image.shape[-2]) * int(image.shape[-1])
        if n > start and total + pixels > CHUNK_PIXELS:
            runs.append((start, n))
            start, total = n, 0
        total += pixels
    runs.append((start, len(images)))
    return runs


# ------------------------------------------------------------------------------ the trainer's side
class Normalizer:
    """(N, 3, H, W) of values 0..255 (uint8 or float) -> float32 normalised with ImageNet's statistics, on the
    device (channels-last on a GPU).

    On the CPU the result is written into one buffer kept for the next batch of the same shape, and so is only
    good until the next call (the CPU training loop and Score Image Model use each batch before asking for the
    next). A fresh float batch of 64 crops at 224 px is 38 MB, above glibc's largest mmap threshold: each one was
    mapped and page-faulted anew, which made this 0.45 ms an image of the main process's time on the build
    machine, against 0.09 ms into a kept buffer."""

    def __init__(self, device: torch.device):
        self.device = device
        self.mean = torch.tensor(MEAN, device=device).view(1, 3, 1, 1)
        self.std = torch.tensor(STD, device=device).view(1, 3, 1, 1)
        self.scale, self.shift = 1.0 / (255.0 * self.std), self.mean / self.std
        self._kept: Optional[torch.Tensor] = None

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        images = images.to(self.device, non_blocking=True)
        if self.device.type == "cuda":
            images = images.contiguous(memory_format=torch.channels_last)
            return images.float().div_(255.0).sub_(self.mean).div_(self.std)
        if self._kept is None or self._kept.shape != images.shape:
            self._kept = torch.empty(images.shape, dtype=torch.float32)
        # (x / 255 - mean) / std, as x * scale - shift: two passes over the kept buffer
        return self._kept.copy_(images).mul_(self.scale).sub_(self.shift)


@dataclass
class Input:
    """The chosen path: its datasets, the loader's collate function, and `prepare` (a loader batch ->
    (images, labels) on the device, ready for the model)."""

    name: str  # cpu | gpu | as-given
    train: Any
    val: Any
    collate: Optional[Callable[..., Any]]
    prepare_train: Callable[[Any], Tuple[torch.Tensor, torch.Tensor]]
    prepare_val: Callable[[Any], Tuple[torch.Tensor, torch.Tensor]]
    why: str = ""


def all_jpeg(*datasets: Any) -> bool:
    return all(os.path.splitext(path)[1].lower() in JPEG_SUFFIXES for ds in datasets for path, _ in ds.samples)


def resolve(choice: str, device: torch.device, jpeg: bool) -> Tuple[str, str]:
    """(path, why) for trainer.input=`choice` on `device`."""
    if choice not in INPUTS:
        raise ConfigError("trainer.input", f"'{choice}' is not supported", INPUTS)
    if choice == "gpu":
        if device.type != "cuda":
            raise ConfigError("trainer.input", f"gpu decodes on a GPU, and this rank trains on {device}", ("auto", "cpu"))
        return "gpu", "trainer.input=gpu"
    if choice == "cpu":
        return "cpu", "trainer.input=cpu"
    if device.type != "cuda":
        return "cpu", "auto: no GPU"
    if not jpeg:
        return "cpu", "auto: not every image is a JPEG"
    return "gpu", "auto: a GPU and JPEG images"


def for_trainer(cfg: Any, device: torch.device, train_ds: Any, val_ds: Any, train_ops: Optional[List[list]],
                val_ops: Optional[List[list]], size: int, val_size: int) -> Input:
    """The input path trainer.input chooses for these datasets on `device`."""
    as_given = not (hasattr(train_ds, "samples") and hasattr(val_ds, "samples") and hasattr(train_ds, "classes"))
    choice = str(cfg.trainer.get("input", "auto"))
    if as_given:  # a caller's own datasets: their transforms already give float tensors
        if choice == "gpu":
            raise ConfigError("trainer.input", "gpu needs an image folder (data=image_directory or the sample)", ("auto", "cpu"))

        def moved(batch: Any) -> Tuple[torch.Tensor, torch.Tensor]:
            images, labels = batch
            images = images.to(device, non_blocking=True)
            if device.type == "cuda":
                images = images.contiguous(memory_format=torch.channels_last)
            return images, labels.to(device, non_blocking=True)

        return Input("as-given", train_ds, val_ds, None, moved, moved, "datasets given")
    name, why = resolve(choice, device, choice == "cpu" or all_jpeg(train_ds, val_ds))
    train_aug = augmentation(cfg, True, train_ops, size)
    val_aug = augmentation(cfg, False, val_ops, val_size)
    classes = list(train_ds.classes)
    normalize = Normalizer(device)
    if name == "cpu":
        def prepare(batch: Any) -> Tuple[torch.Tensor, torch.Tensor]:
            images, labels = batch
            return normalize(images), labels.to(device, non_blocking=True)

        return Input("cpu", CpuImages(train_ds.samples, classes, train_aug), CpuImages(val_ds.samples, classes, val_aug),
                     None, prepare, prepare, why)
    decoders = {True: DeviceDecoder(train_ds.samples, train_aug, device), False: DeviceDecoder(val_ds.samples, val_aug, device)}

    def gpu_prepare(training: bool) -> Callable[[Any], Tuple[torch.Tensor, torch.Tensor]]:
        def prepare(batch: Any) -> Tuple[torch.Tensor, torch.Tensor]:
            flat, lengths, labels, indices = batch
            images = decoders[training](split_bytes(flat, lengths), indices)
            return normalize(images), labels.to(device, non_blocking=True)
        return prepare

    return Input("gpu", FileBytes(train_ds.samples, classes), FileBytes(val_ds.samples, classes), collate_bytes,
                 gpu_prepare(True), gpu_prepare(False), why)


def loader_settings(workers: int, cuda: bool) -> dict:
    """DataLoader settings sized to the machine: no more workers than CPUs this process may use, kept alive
    across epochs, a deeper prefetch where a GPU waits for the batches, pinned memory on a GPU."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = max(0, min(int(workers), cpus))
    args: dict = dict(num_workers=workers, pin_memory=cuda, persistent_workers=workers > 0)
    if workers > 0:
        args["prefetch_factor"] = 4 if cuda else 2
    return args
