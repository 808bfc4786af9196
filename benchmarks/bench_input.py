"""Images per second of Train PyTorch Model's input pipeline alone (no model), on a folder of real-size JPEG
photographs made here: the previous path (PIL decodes every JPEG whole, RandomResizedCrop + flip on the
PIL image, ToTensor + Normalize in the loader's workers: torchvision's reference recipe, which mltrain ran
until trainer.input) against mltrain's CPU path (JPEGs decoded at reduced size where the crop allows, uint8
batches, normalised in the main process) and, where CUDA is available, the GPU path (workers read bytes,
nvJPEG decodes, transforms.v2 crops and flips on the device).

Every side delivers the same thing: a normalised float32 batch of 224 px training crops (RandomResizedCrop,
scale 0.08 to 1, and a flip, as the trainer's defaults), on the device that would train on it. Each side has
its own DataLoader with the same workers and batch size, kept alive (persistent workers) and warmed by one
pass; then one pass over the folder per side and round, the sides alternating (their order turns each round).
A fourth side, *decode*, only reads and decodes each file whole (nothing after): the floor for any CPU path that
decodes every pixel, against which the CPU path's images/s is also given (a JPEG too small for a reduced decode
cannot go faster than that on the CPU, whatever follows the decode).
Prints each side's median images/s, per loader worker, and the median of the per-round ratios to the previous path
and to the decode floor.

Usage: .venv/bin/python benchmarks/bench_input.py [--images 400] [--width 800] [--height 600] [--noise 6] [--quality 90] [--rounds 5]
       [--workers N (default: the CPUs this process may use)] [--batch 64] [--size 224] [--split train|val]
       [--device cpu|cuda] [--main-threads 1]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple


def make_photos(root: Path, images: int, width: int, height: int, classes: int = 4, noise: float = 6.0,
                quality: int = 90, start: int = 0) -> int:
    """Photograph-like JPEGs: smooth gradients and waves under sensor-like noise (standard deviation `noise`),
    saved at `quality`; files start..start+images-1 (a chunk of a folder made in parallel); returns bytes written."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(start)
    y, x = np.mgrid[0:height, 0:width].astype("float32")
    total = 0
    for n in range(start, start + images):
        out = root / f"class_{n % classes}"
        out.mkdir(parents=True, exist_ok=True)
        a, b, phase = rng.uniform(15, 60), rng.uniform(15, 60), rng.uniform(0, 6.28)
        base = np.stack([x * 255 / width, y * 255 / height, 128 + 90 * np.sin(x / a + y / b + phase)], -1)
        pixels = base * rng.uniform(0.5, 1.0) + rng.normal(0, noise, (height, width, 3))
        path = out / f"{n:05d}.jpg"
        Image.fromarray(pixels.clip(0, 255).astype("uint8")).save(path, quality=quality)
        total += path.stat().st_size
    return total


def sides(folder: Path, a: argparse.Namespace) -> Dict[str, Tuple[Any, Callable[[Any], Any]]]:
    """name -> (a DataLoader, the step that makes its batch a normalised float batch on the device)."""
    import torch
    from omegaconf import OmegaConf
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    from mltrain.components import data, image_input

    device = torch.device(a.device)
    cfg = OmegaConf.create({"trainer": {"input": "cpu"},
                            "data": {"image_size": a.size, "min_crop_scale": 0.08, "horizontal_flip": True}})
    settings = dict(batch_size=a.batch, shuffle=True, num_workers=a.workers, persistent_workers=a.workers > 0,
                    pin_memory=device.type == "cuda", drop_last=False)
    # the previous path: data.transforms (RandomResizedCrop + flip + ToTensor + Normalize on PIL) and load_image
    training = a.split == "train"
    reference = ImageFolder(str(folder), transform=data.transforms(cfg, train=training), loader=data.load_image)

    def moved(batch: Any) -> Any:
        images, labels = batch
        return images.to(device, non_blocking=True), labels.to(device, non_blocking=True)

    out: Dict[str, Tuple[Any, Callable[[Any], Any]]] = {"previous": (DataLoader(reference, **settings), moved)}
    plain = ImageFolder(str(folder))
    # the floor on the CPU: each file read and decoded whole by libjpeg-turbo, nothing else (one number per image
    # handed back), the least a CPU path that decodes every pixel can do
    out["decode"] = (DataLoader(DecodeOnly(plain.samples), **settings), lambda batch: (batch[0], batch[1]))
    chosen = ["cpu"] + (["gpu"] if device.type == "cuda" else [])
    for name in chosen:
        cfg.trainer.input = name
        inp = image_input.for_trainer(cfg, device, plain, plain, None, None, a.size, a.size)
        prefetch = {"prefetch_factor": 4} if a.workers > 0 else {}
        dataset, prepare = (inp.train, inp.prepare_train) if training else (inp.val, inp.prepare_val)
        out[name] = (DataLoader(dataset, collate_fn=inp.collate, **settings, **prefetch), prepare)
    return out


class DecodeOnly:
    """(the decoded image's first pixel, label): read and decode with nothing after (torchvision's decode_jpeg, the
    libjpeg-turbo PIL calls too)."""

    def __init__(self, samples: List[Tuple[str, int]]):
        self.samples = samples

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> Tuple[Any, int]:
        import torch
        from torchvision.io import ImageReadMode, decode_jpeg

        path, label = self.samples[index]
        with open(path, "rb") as f:
            image = decode_jpeg(torch.frombuffer(bytearray(f.read()), dtype=torch.uint8), mode=ImageReadMode.RGB)
        return image[:, 0, 0].clone(), label


def one_pass(loader: Any, prepare: Callable[[Any], Any], cuda: bool) -> float:
    import torch

    start, seen = time.perf_counter(), 0
    for batch in loader:
        images, labels = prepare(batch)
        seen += int(labels.shape[0])
    if cuda:
        torch.cuda.synchronize()
    return seen / (time.perf_counter() - start)


def main() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--width", type=int, default=800)
    p.add_argument("--height", type=int, default=600)
    p.add_argument("--noise", type=float, default=6.0, help="the photographs' noise (25 with --quality 95: ~110 KB at 400x350)")
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--workers", type=int, default=cpus)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--split", choices=("train", "val"), default="train",
                   help="train: random resized crop + flip; val: resize to 256/224 of the size + center crop")
    p.add_argument("--device", default=None, help="cpu | cuda (default: cuda where available)")
    p.add_argument("--main-threads", type=int, default=1,
                   help="torch's threads in this (the trainer's) process; 0 leaves torch's default")
    a = p.parse_args()
    import torch

    # This process stands in for a trainer whose threads are busy with the model. With no model here, torch's
    # default pool (one thread a core) spin-waits between the CPU path's per-batch normalisations on the cores the
    # workers decode on: 0.44 ms of this process's CPU time an image against 0.20 with one thread (2-core build
    # machine, ImageNet-sized JPEGs); the other sides do almost nothing here either way.
    if a.main_threads > 0:
        torch.set_num_threads(a.main_threads)

    a.device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-input-"))
    try:
        size = make_photos(work / "photos", a.images, a.width, a.height, noise=a.noise, quality=a.quality)
        print(f"folder: {a.images} JPEGs of {a.width}x{a.height}, {size / a.images / 1e3:.0f} KB each on average; "
              f"{a.workers} loader worker(s), {cpus} CPU(s), batch {a.batch}, {a.size} px {a.split} crops, device {a.device}, "
              f"{torch.get_num_threads()} torch thread(s) here", flush=True)
        loaders = sides(work / "photos", a)
        cuda = a.device == "cuda"
        for loader, prepare in loaders.values():  # warm: workers started, caches and the GPU decoder primed
            one_pass(loader, prepare, cuda)
        names = list(loaders)
        rates: Dict[str, List[float]] = {n: [] for n in names}
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                rates[name].append(one_pass(*loaders[name], cuda))
            print(f"round {r + 1}: " + "  ".join(f"{n} {rates[n][-1]:.1f}" for n in names) + " img/s", flush=True)
        per_core = max(1, a.workers)
        print(f"\n{'path':<10} {'img/s':>9} {'per worker':>11} {'/ previous':>11} {'/ decode':>9}   rounds")
        for name in names:
            ratio = statistics.median(x / y for x, y in zip(rates[name], rates["previous"]))
            floor = statistics.median(x / y for x, y in zip(rates[name], rates["decode"]))
            med = statistics.median(rates[name])
            print(f"{name:<10} {med:9.1f} {med / per_core:11.1f} {ratio:11.2f} {floor:9.2f}   {[round(x, 1) for x in rates[name]]}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
