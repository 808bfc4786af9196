"""Throughput of the built-in trainer on one GPU, AMP (float16) on and off, against a plain hand-written
PyTorch loop on the same GPU: same torchvision model, bundled data, transforms, batch size, loader
workers and GPU settings (channels-last, cuDNN autotuning, pinned memory, as the trainer does on a GPU);
the plain loop's AMP is PyTorch's documented recipe (autocast float16 + GradScaler). One run, alternating.

Reports train images/second, the median over epochs 2..N of each run (the first warms caches, cuDNN's
autotuner and the loader's workers up), the median of the runs, and the ratios.
Usage: python benchmarks/bench_gpu.py [--epochs 6] [--rounds 3] [--batch 128] [--size 224] [--workers 8]
       [--budget-s 220]   (no new round is started once another would not end within the budget)
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
from pathlib import Path
from typing import Dict, List


def mltrain_cmd() -> List[str]:
    """The installed `mltrain`: beside this interpreter, else on PATH, else `python -m mltrain`."""
    exe = shutil.which("mltrain", path=str(Path(sys.executable).parent)) or shutil.which("mltrain")
    return [exe] if exe else [sys.executable, "-m", "mltrain"]


def epoch_rates(values: List[float]) -> float:
    return statistics.median(values[1:] if len(values) > 1 else values)


def mltrain_rate(env: Dict[str, str], work: Path, a: argparse.Namespace, amp: bool) -> float:
    home = Path(env["MLTRAIN_HOME"])
    before = set((home / "runs").glob("train_pytorch_model_*"))
    subprocess.run(mltrain_cmd() + [f"trainer.epochs={a.epochs}", f"trainer.batch_size={a.batch}", f"data.image_size={a.size}",
                                    f"data.num_workers={a.workers}", f"trainer.amp={str(amp).lower()}", f"compute.gpus={a.gpus}",
                                    "trainer.patience=100", "trainer.print_frequency=100000", "trainer.keep_checkpoints=1"],
                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    (run,) = set((home / "runs").glob("train_pytorch_model_*")) - before
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    where = (run / "logs" / "rank_0.log").read_text()
    if a.gpus and " on cuda" not in where:
        raise SystemExit(f"the trainer did not run on the GPU: {[x for x in where.splitlines() if ' rank(s) on ' in x]}")
    rates = sorted((r["step"], r["value"]) for r in rows if r["name"] == "train_images_per_second" and r.get("rank", 0) == 0)
    shutil.rmtree(run, ignore_errors=True)  # checkpoints: 90 MB each
    return epoch_rates([v for _, v in rates])


def plain_rate(env: Dict[str, str], work: Path, train_dir: Path, a: argparse.Namespace, amp: bool) -> float:
    out = subprocess.run([sys.executable, __file__, "--plain", str(train_dir), "--epochs", str(a.epochs), "--batch", str(a.batch),
                          "--size", str(a.size), "--workers", str(a.workers), "--gpus", str(a.gpus)] + (["--amp"] if amp else []),
                         cwd=work, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the plain loop failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return epoch_rates([float(x) for x in out.stdout.split()])


def amp_step(model, opt, scaler, loss_fn, x, y, amp: bool) -> None:
    """One training step of PyTorch's documented AMP recipe (autocast float16, GradScaler); `amp` False: float32."""
    import torch

    with torch.autocast(x.device.type, dtype=torch.float16, enabled=amp):
        loss = loss_fn(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()


def plain_loop(a: argparse.Namespace) -> None:
    """The baseline: what a user writes without mltrain. Prints each epoch's train images/second."""
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, models, transforms

    torch.manual_seed(1)
    device = torch.device("cuda" if a.gpus else "cpu")  # no quiet fall-back to the CPU
    cuda = device.type == "cuda"
    torch.backends.cudnn.benchmark = True
    tf = transforms.Compose([transforms.RandomResizedCrop(a.size, scale=(0.6, 1.0)), transforms.ToTensor(),
                             transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    ds = datasets.ImageFolder(a.plain, transform=tf)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, pin_memory=cuda,
                        persistent_workers=a.workers > 0)
    model = models.resnet18(num_classes=len(ds.classes)).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=a.amp and cuda)
    loss_fn = nn.CrossEntropyLoss()
    for _epoch in range(a.epochs):
        model.train()
        start, seen = time.perf_counter(), 0
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            if cuda:
                x = x.contiguous(memory_format=torch.channels_last)
            amp_step(model, opt, scaler, loss_fn, x, y, a.amp and cuda)
            seen += y.size(0)
        if cuda:
            torch.cuda.synchronize()
        print(f"{seen / (time.perf_counter() - start):.2f}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--gpus", type=int, default=1, help="compute.gpus of the mltrain runs (0: a CPU dry run)")
    p.add_argument("--budget-s", type=float, default=220.0)
    p.add_argument("--plain", help=argparse.SUPPRESS)
    p.add_argument("--amp", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.plain:
        plain_loop(a)
        return
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-gpu-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off"}
    os.environ["MLTRAIN_HOME"] = env["MLTRAIN_HOME"]
    from mltrain.components.data import sample_dirs

    train_dir, _ = sample_dirs()
    names = ["mltrain amp", "plain amp", "mltrain fp32", "plain fp32"]
    got: Dict[str, List[float]] = {n: [] for n in names}
    began, took = time.monotonic(), 0.0
    for i in range(a.rounds):
        if i and time.monotonic() - began + took > a.budget_s:
            print(f"stopped after {i} round(s): another would pass the {a.budget_s:.0f} s budget", flush=True)
            break
        t0 = time.monotonic()
        for name in names:
            amp = name.endswith("amp")
            rate = mltrain_rate(env, work, a, amp) if name.startswith("mltrain") else plain_rate(env, work, train_dir, a, amp)
            got[name].append(rate)
            print(f"round {i + 1}: {name:<13} {rate:9.1f} img/s", flush=True)
        took = time.monotonic() - t0
    med = {n: statistics.median(v) for n, v in got.items()}
    shutil.rmtree(work, ignore_errors=True)
    which = f"median of epochs 2..{a.epochs}" if a.epochs > 1 else "one epoch"
    print(f"\nresnet18, bundled digits at {a.size}px, batch {a.batch}, {a.workers} loader workers, {a.epochs} epochs ({which}), "
          f"{len(got[names[0]])} alternating round(s), {os.cpu_count()} CPUs")
    print(f"{'':<13} {'img/s':>9}   runs")
    for n in names:
        print(f"{n:<13} {med[n]:9.1f}   {[round(x, 1) for x in got[n]]}")
    print(f"mltrain / plain: amp {med['mltrain amp'] / med['plain amp']:.3f}   fp32 {med['mltrain fp32'] / med['plain fp32']:.3f}"
          f"   (target >= 0.98)")
    print(f"amp / fp32:      mltrain {med['mltrain amp'] / med['mltrain fp32']:.3f}   plain {med['plain amp'] / med['plain fp32']:.3f}")


if __name__ == "__main__":
    main()
