"""Models, measured in one run on the CPU:

1. Score Image Model's scoring loop (decode, transform, forward, softmax; batches of 64) with ONNX Runtime
   against PyTorch eager, the same resnet18 and the same images, images per second, alternating,
   median of N;
2. `mltrain models register` of that model directory (weights and model.onnx): the first registration
   (the store's schema is created) and later ones (median of N).

Usage: .venv/bin/python benchmarks/bench_models.py [--repeats 3] [--images 128] [--size 224]
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
    args = ap.parse_args()
    import torch
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
    paths = images(work / "images", args.images, args.size)
    cfg = OmegaConf.create({"data": {"image_size": args.size, "min_crop_scale": 0.08, "normalize": True}})
    transform = data.transforms(cfg, train=False)
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
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    times = []
    for _ in range(args.repeats + 1):
        t0 = time.perf_counter()
        subprocess.run([str(BIN / "mltrain"), "models", "register", "bench", "--path", str(model_dir)], env=env,
                       check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    print(f"mltrain models register ({sum(p.stat().st_size for p in model_dir.iterdir()) / 2**20:.0f} MB): first "
          f"{times[0]:.2f}s (creates the store), then {statistics.median(times[1:]):.2f}s (median of {args.repeats})")
    print(json.dumps({"rates": med, "ratio": med["onnxruntime"] / med["pytorch"], "register_first_s": times[0],
                      "register_s": statistics.median(times[1:])}))


if __name__ == "__main__":
    main()
