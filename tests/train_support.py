"""Helpers for the tests that train: a tiny ImageFolder of real digit scans, the overrides that make
a training run quick, and a run's metrics by epoch."""
from __future__ import annotations

from pathlib import Path

from support import metric_rows

FAST = ["trainer.batch_size=8", "trainer.print_frequency=2", "data.image_size=16", "data.min_crop_scale=0.8"]


def write_digits(root: Path, classes=(0, 1, 2), per_class: int = 16, offset: int = 0, relabel=None) -> Path:
    """A small ImageFolder directory of real scans from scikit-learn's digits."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for c in classes:
        out = root / str(relabel[c] if relabel else c)
        out.mkdir(parents=True, exist_ok=True)
        for j, i in enumerate(np.flatnonzero(digits.target == c)[offset:offset + per_class]):
            Image.fromarray((digits.images[i] * 15).astype("uint8"), mode="L").save(out / f"{j}.png")
    return root


def data_args(train: Path, val: Path) -> list:
    return ["data=image_directory", f"data.train_dir={train}", f"data.val_dir={val}", "data.num_workers=0"]


def epoch_metrics(run: dict) -> dict:
    rows = metric_rows(run["dir"])
    out: dict = {}
    for r in rows:
        if not r["name"].startswith("system/"):  # the sampler's steps count samples, not epochs
            out.setdefault(r["step"], {})[r["name"]] = r["value"]
    return out


def sgd_after_a_skipped_step(make, device: str):
    """Weights after three AMP steps through GradScaler, the first of which overflows once scaled (skipped)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).to(device)
    opt = make(model)
    scaler = torch.amp.GradScaler(device, init_scale=2.0 ** 16)
    x = torch.randn(4, 8, device=device)
    for big in (1e36, 1.0, 1.0):
        opt.zero_grad()
        scaler.scale(model(x).square().sum() * big).backward()
        scaler.step(opt)
        scaler.update()
    return model.weight.detach().cpu()
