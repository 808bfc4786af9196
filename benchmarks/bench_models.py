"""Models, measured in one run on the CPU:

1. Score Image Model's scoring loop (decode, transform, forward, softmax; batches of 64) with ONNX Runtime
   against PyTorch eager, the same resnet18 and the same images, images per second, alternating,
   median of N;
2. `mltrain models register` of that model directory (weights and model.onnx): the first registration
   (the store's schema is created), then later ones against MLflow's own `mlflow.register_model` of the
   same files on the same store, each a new process (a user's script), alternating, median of
   --register-repeats (at least 7).

Usage: .venv/bin/python benchmarks/bench_models.py [--repeats 3] [--images 128] [--size 224] [--register-only]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def images(folder: Path, n: int, size: int) -> list:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(folder / f"{i:04d}.png")
    return sorted(folder.glob("*.png"))


def score_rate(model, paths: list, transform) -> float:
    import torch
    from PIL import Image

    start = time.perf_counter()
    with torch.no_grad():
        for i in range(0, len(paths), 64):
            x = torch.stack([transform(Image.open(p).convert("RGB")) for p in paths[i:i + 64]])
            torch.softmax(model(x), dim=1).max(dim=1)
    return len(paths) / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--register-repeats", type=int, default=9)
    ap.add_argument("--register-only", action="store_true", help="skip the scoring comparison")
    args = ap.parse_args()
    from omegaconf import OmegaConf

    from mltrain.components import data, onnx_export
    from mltrain.components import model_directory as models

    work = Path(tempfile.mkdtemp(prefix="bench-models-"))
    model_dir = work / "model"
    spec = {"name": "resnet18", "pretrained": False}
    net = models.build(spec, num_classes=10).eval()
    models.save_model_dir(model_dir, spec, [str(i) for i in range(10)], args.size, net.state_dict())
    onnx_export.export(net, model_dir, args.size, 64)
    eager, _ = models.load_model_dir(str(model_dir))
    ort_model = onnx_export.OnnxModel(str(model_dir))
    cfg = OmegaConf.create({"data": {"image_size": args.size, "min_crop_scale": 0.08, "normalize": True}})
    transform = data.transforms(cfg, train=False)
    if not args.register_only:
        med = compare_scoring(args, work, model_dir, eager, ort_model, transform)
    register = compare_register(work, model_dir, max(args.register_repeats, 7))
    print(json.dumps({"scoring": None if args.register_only else med, **register}))


def compare_scoring(args, work: Path, model_dir: Path, eager, ort_model, transform) -> dict:
    import torch

    paths = images(work / "images", args.images, args.size)
    torch.set_num_threads(os.cpu_count() or 1)
    score_rate(eager, paths[:16], transform), score_rate(ort_model, paths[:16], transform)  # warm-up
    rates = {"pytorch": [], "onnxruntime": []}
    for _ in range(args.repeats):
        rates["pytorch"].append(score_rate(eager, paths, transform))
        rates["onnxruntime"].append(score_rate(ort_model, paths, transform))
    med = {k: statistics.median(v) for k, v in rates.items()}
    print(f"Score Image Model loop, resnet18 at {args.size} px, {args.images} images: ONNX Runtime "
          f"{med['onnxruntime']:.1f} img/s, PyTorch eager {med['pytorch']:.1f} img/s: ratio "
          f"{med['onnxruntime'] / med['pytorch']:.2f} (median of {args.repeats})")
    return {**med, "ratio": med["onnxruntime"] / med["pytorch"]}


#: MLflow's own registration, as a user's script would call it on the same store.
MLFLOW_REGISTER = "import sys, mlflow; mlflow.set_registry_uri(sys.argv[1]); mlflow.register_model(sys.argv[2], sys.argv[3])"


def compare_register(work: Path, model_dir: Path, repeats: int) -> dict:
    home = work / "home"
    env = {**os.environ, "MLTRAIN_HOME": str(home)}
    mltrain = [str(BIN / "mltrain"), "models", "register", "bench", "--path", str(model_dir)]

    def timed(cmd) -> float:
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        return time.perf_counter() - t0

    first = timed(mltrain)
    source = next((home / "models").glob("sha256-*"))  # the files mltrain's version points at
    mlflow = [sys.executable, "-c", MLFLOW_REGISTER, f"sqlite:///{home / 'mlflow.db'}", str(source), "bench-mlflow"]
    timed(mlflow)  # warm-up: the page cache as warm for MLflow as for mltrain
    ours, theirs = [], []
    for _ in range(repeats):
        ours.append(timed(mltrain))
        theirs.append(timed(mlflow))
    o, t = statistics.median(ours), statistics.median(theirs)
    size = sum(p.stat().st_size for p in model_dir.iterdir()) / 2**20
    print(f"mltrain models register ({size:.0f} MB): first {first:.2f}s (creates the store), then {o:.2f}s; "
          f"mlflow.register_model on the same store {t:.2f}s: ratio {o / t:.2f} (target <= 1.1; medians of "
          f"{repeats} alternating pairs, {os.cpu_count()} CPUs)")
    return {"register_first_s": first, "register_s": o, "mlflow_register_model_s": t, "register_ratio": o / t}


if __name__ == "__main__":
    main()
