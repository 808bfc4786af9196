"""Is the GPU fed? ResNet-50 at 224 px with AMP (float16) and channels-last on one GPU, trained from a folder of
ImageNet-like JPEGs that the benchmark makes (about 400x350 px and 110 KB each), against the ceiling: the
same model, batch, optimizer and AMP on synthetic data already in GPU memory, where no input pipeline runs.

Arms, one round each in turn, alternating (the order turns each round):
- ceiling       the trainer's step (its fused SGD, GradScaler) on a synthetic batch resident on the GPU
- mltrain gpu   `mltrain ... trainer.input=gpu` (workers read bytes; nvJPEG decodes, transforms.v2 crops there)
- mltrain cpu   `mltrain ... trainer.input=cpu` (workers decode at reduced size where they can, uint8 batches)
- plain         torchvision's reference recipe in a hand-written loop (ImageFolder + PIL + RandomResizedCrop(224)
                + flip + ToTensor + Normalize in the workers), the same model, AMP (PyTorch's recipe: autocast,
                GradScaler, SGD as constructed by default), channels-last and workers

Each arm reports train images/second per epoch, the median of epochs 2..N (the first warms cuDNN's autotuner,
the workers and nvJPEG); the mltrain arms' figure is the trainer's own `train_images_per_second` metric.
Printed: each arm's median over rounds, its ratio to the ceiling, and a breakdown of the GPU path's decode.

Usage: python benchmarks/bench_gpu_feed.py [--images 8000] [--epochs 3] [--rounds 2] [--batch 128] [--workers N]
       [--arms ceiling,mltrain-gpu,mltrain-cpu,plain] [--budget-s 240] [--device cuda]
       (--device cpu runs the same steps with ResNet-18 on 64 px and few images: a check of the benchmark itself)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpu import amp_step, mltrain_cmd  # noqa: E402
from bench_input import make_photos  # noqa: E402

CLASSES = 4
ARMS = ("ceiling", "mltrain-gpu", "mltrain-cpu", "plain")


def cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def make_folder(root: Path, images: int, a: argparse.Namespace) -> float:
    """`images` JPEGs in CLASSES class folders, made by every CPU in chunks; returns the mean file size in KB."""
    chunk = max(1, images // (cpus() * 2))
    with ProcessPoolExecutor(cpus()) as pool:
        jobs = [pool.submit(make_photos, root, min(chunk, images - s), a.width, a.height, CLASSES, a.noise, a.quality, s)
                for s in range(0, images, chunk)]
        total = sum(j.result() for j in jobs)
    return total / images / 1e3


def model_name(a: argparse.Namespace) -> str:
    return "resnet50" if a.device == "cuda" else "resnet18"


def epoch_median(values: List[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


# ------------------------------------------------------------------------------ arms run in their own process
def ceiling(a: argparse.Namespace) -> None:
    """The same model, batch and training step as the trainer's, on one synthetic batch resident on the device."""
    import torch
    import torch.nn as nn
    from torchvision import models

    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = True
    model = getattr(models, model_name(a))(num_classes=CLASSES).to(device)
    x = torch.randn(a.batch, 3, a.size, a.size, device=device)
    y = torch.randint(0, CLASSES, (a.batch,), device=device)
    if cuda:
        model, x = model.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
    from mltrain.components.trainer import sgd

    opt = sgd(model, 0.001, 0.9, 1e-4, fused=cuda)  # the trainer's optimizer: fused on a GPU
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)
    loss_fn = nn.CrossEntropyLoss()
    steps = max(1, a.images // a.batch)
    model.train()
    for _epoch in range(a.epochs):
        start = time.perf_counter()
        for _ in range(steps):
            amp_step(model, opt, scaler, loss_fn, x, y, cuda)
        if cuda:
            torch.cuda.synchronize()
        print(f"{steps * a.batch / (time.perf_counter() - start):.2f}", flush=True)


def plain(a: argparse.Namespace) -> None:
    """What a user writes without mltrain: torchvision's reference recipe, decoded and augmented in the workers."""
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, models, transforms

    device = torch.device(a.device)
    cuda = device.type == "cuda"
    torch.manual_seed(1)
    torch.backends.cudnn.benchmark = True
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
                             transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    ds = datasets.ImageFolder(a.arm_folder, transform=tf)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, pin_memory=cuda,
                        persistent_workers=a.workers > 0, **({"prefetch_factor": 4} if a.workers else {}))
    model = getattr(models, model_name(a))(num_classes=len(ds.classes)).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)  # as PyTorch's AMP recipe
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)
    loss_fn = nn.CrossEntropyLoss()
    for _epoch in range(a.epochs):
        model.train()
        start, seen = time.perf_counter(), 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if cuda:
                x = x.contiguous(memory_format=torch.channels_last)
            amp_step(model, opt, scaler, loss_fn, x, y, cuda)
            seen += y.size(0)
        if cuda:
            torch.cuda.synchronize()
        print(f"{seen / (time.perf_counter() - start):.2f}", flush=True)


def breakdown(a: argparse.Namespace) -> None:
    """Where the GPU path's time goes for one batch: reading, nvJPEG's decode, the crops, normalising."""
    import torch
    from torchvision.datasets import ImageFolder
    from torchvision.io import ImageReadMode, decode_jpeg

    from mltrain.components import image_augment, image_input

    device = torch.device(a.device)
    samples = ImageFolder(a.arm_folder).samples[:a.batch]
    aug = image_augment.Augmentation(size=a.size, training=True, flip=True)
    decoder, normalize = image_input.DeviceDecoder(samples, aug, device), image_input.Normalizer(device)

    def timed(fn, n: int = 5) -> float:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return (time.perf_counter() - start) / n * 1e3

    flat, lengths, _, _ = image_input.collate_bytes([image_input.FileBytes(samples, ["x"])[i] for i in range(len(samples))])
    encoded = image_input.split_bytes(flat, lengths)
    indices = torch.arange(len(samples))
    read = timed(lambda: image_input.collate_bytes([image_input.FileBytes(samples, ["x"])[i] for i in range(len(samples))]))
    decode = timed(lambda: decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device))
    images = decode_jpeg(encoded, mode=ImageReadMode.RGB, device=device)
    draws = timed(lambda: decoder.boxes(list(images)))
    whole = timed(lambda: normalize(decoder(encoded, indices)))
    cropped = timed(lambda: decoder(encoded, indices))
    n = len(samples)
    print(f"GPU path, one batch of {n} (ms): read {read:.1f} (in the workers) | decode {decode:.1f} "
          f"({n / decode * 1e3:.0f} img/s) | crop/flip draws {draws:.1f} | decode+crop+flip {cropped:.1f} | +normalise {whole:.1f} "
          f"({n / whole * 1e3:.0f} img/s); first image {tuple(images[0].shape)}", flush=True)


# ------------------------------------------------------------------------------ the driver
def run_arm(arm: str, a: argparse.Namespace, work: Path, env: Dict[str, str]) -> float:
    if arm.startswith("mltrain-"):
        run = Path(env["MLTRAIN_HOME"]) / "runs" / f"feed-{arm}-{time.time_ns()}"
        out = subprocess.run(mltrain_cmd() + [f"run.id={run.name}",
            f"model={model_name(a)}", "data=image_directory", f"data.train_dir={work / 'train'}", f"data.val_dir={work / 'val'}",
            f"data.image_size={a.size}", f"data.num_workers={a.workers}", f"trainer.input={arm.split('-')[1]}",
            f"trainer.epochs={a.epochs}", f"trainer.batch_size={a.batch}", f"trainer.amp={str(a.device == 'cuda').lower()}",
            f"compute.gpus={int(a.device == 'cuda')}", "trainer.patience=100", "trainer.print_frequency=100000",
            "trainer.keep_checkpoints=1"], cwd=work, env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{arm} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
        log = (run / "logs" / "rank_0.log").read_text()
        said = [x for x in log.splitlines() if x.startswith("input: ")]
        if a.device == "cuda" and " on cuda" not in log or not said or f"input: {arm.split('-')[1]} path" not in said[0]:
            raise SystemExit(f"{arm} did not run as asked: {said} {[x for x in log.splitlines() if ' on cuda' in x]}")
        rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
        rates = [r["value"] for r in sorted(rows, key=lambda r: r["step"])
                 if r["name"] == "train_images_per_second" and r.get("rank", 0) == 0]
        shutil.rmtree(run, ignore_errors=True)  # checkpoints
        return epoch_median(rates)
    out = subprocess.run([sys.executable, __file__, f"--arm={arm}", f"--arm-folder={work / 'train'}", f"--images={a.images}",
                          f"--epochs={a.epochs}", f"--batch={a.batch}", f"--size={a.size}", f"--workers={a.workers}",
                          f"--device={a.device}"], cwd=work, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{arm} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return epoch_median([float(x) for x in out.stdout.split()])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=8000, help="training JPEGs (validation gets a sixteenth)")
    p.add_argument("--width", type=int, default=400)
    p.add_argument("--height", type=int, default=350)
    p.add_argument("--noise", type=float, default=25.0)
    p.add_argument("--quality", type=int, default=95)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=cpus())
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--budget-s", type=float, default=240.0, help="no round is started that would end past this")
    p.add_argument("--device", default="cuda")
    p.add_argument("--arm", help=argparse.SUPPRESS)
    p.add_argument("--arm-folder", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.arm:
        {"ceiling": ceiling, "plain": plain, "breakdown": breakdown}[a.arm](a)
        return
    arms = [x for x in a.arms.split(",") if x]
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise SystemExit(f"--arms: unknown {sorted(unknown)}; choose from {', '.join(ARMS)}")
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-feed-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off", "PYTHONUNBUFFERED": "1"}
    try:
        began = time.monotonic()
        kb = make_folder(work / "train", a.images, a)
        make_folder(work / "val", max(a.batch, a.images // 16), a)
        print(f"{a.images} training JPEGs of {a.width}x{a.height}, {kb:.0f} KB each on average, made in "
              f"{time.monotonic() - began:.1f} s; {model_name(a)} at {a.size} px, batch {a.batch}, "
              f"{'AMP float16, channels-last' if a.device == 'cuda' else 'float32'}, {a.workers} loader workers, "
              f"{cpus()} CPUs, {a.epochs} epochs (median of epochs 2..{a.epochs})", flush=True)
        if a.device == "cuda":
            import torch

            print(f"device: {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
        if "mltrain-gpu" in arms and a.device == "cuda":
            subprocess.run([sys.executable, __file__, "--arm=breakdown", f"--arm-folder={work / 'train'}",
                            f"--batch={a.batch}", f"--size={a.size}", f"--device={a.device}"], env=env, check=False)
        got: Dict[str, List[float]] = {arm: [] for arm in arms}
        began, took = time.monotonic(), 0.0
        for r in range(a.rounds):
            if r and time.monotonic() - began + took > a.budget_s:
                print(f"stopped after {r} round(s): another would pass the {a.budget_s:.0f} s budget", flush=True)
                break
            t0 = time.monotonic()
            for arm in arms[r % len(arms):] + arms[:r % len(arms)]:
                got[arm].append(run_arm(arm, a, work, env))
                print(f"round {r + 1}: {arm:<12} {got[arm][-1]:9.1f} img/s", flush=True)
            took = time.monotonic() - t0
        med = {arm: statistics.median(v) for arm, v in got.items()}
        print(f"\n{'arm':<12} {'img/s':>9} {'/ ceiling':>10}   rounds")
        for arm in arms:
            ratio = f"{med[arm] / med['ceiling']:10.3f}" if "ceiling" in med else f"{'':>10}"
            print(f"{arm:<12} {med[arm]:9.1f} {ratio}   {[round(x, 1) for x in got[arm]]}")
        if "ceiling" in med and "mltrain-gpu" in med:
            print(f"target: mltrain-gpu >= 0.8 of the ceiling and >= 2500 img/s on one H100/H200: "
                  f"{med['mltrain-gpu'] / med['ceiling']:.3f}, {med['mltrain-gpu']:.0f} img/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
