"""Score Image Model on a folder of photograph-size JPEGs: `mltrain job=score_image_model` (the trainer's CPU input
path: loader workers, a JPEG decoded at the reduced size its resize allows, uint8 batches) against what the
component ran before and what a user writes by hand: one process opening each image with PIL, torchvision's
Resize + CenterCrop + ToTensor + Normalize, batches of 64 through the same model.

Both sides score the same folder with the same untrained model directory (ResNet-18, `image_size` 64 by
default: on a CPU a 224 px ResNet costs more than any decode, and the decode is what changed) and write one row
per image. mltrain's side is the whole command, start-up included; the plain side is its own process, torch's
import included. Alternating rounds; prints each side's median seconds and images/s, and the median of the
per-round ratios. Also checks that both predicted the same label for at least 95 % of the images (the reduced
decode resamples from fewer pixels; an untrained model's near-ties may flip).

Usage: .venv/bin/python benchmarks/bench_score_image.py [--images 400] [--width 800] [--height 600]
       [--size 64] [--workers N (default: CPUs)] [--rounds 3]
"""
from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gpu import mltrain_cmd  # noqa: E402
from bench_input import make_photos  # noqa: E402

PLAIN = """
import csv, sys, torch
from pathlib import Path
from PIL import Image
from torchvision import models, transforms as T
import json
model_dir, image_dir, out, size = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
spec = json.loads((model_dir / "model_spec.json").read_text())
model = getattr(models, spec["name"])(num_classes=spec["num_classes"])
model.load_state_dict(torch.load(model_dir / "weights.pt", weights_only=True))
model.eval()
tf = T.Compose([T.Resize(int(round(size * 256 / 224))), T.CenterCrop(size), T.ToTensor(),
                T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
paths = sorted(p for p in image_dir.rglob("*.jpg"))
rows = []
with torch.no_grad():
    for start in range(0, len(paths), 64):
        batch = paths[start:start + 64]
        x = torch.stack([tf(Image.open(p).convert("RGB")) for p in batch])
        probs = torch.softmax(model(x), 1)
        best, idx = probs.max(1)
        rows += [(str(p), spec["class_names"][i], f"{b:.6f}") for p, i, b in zip(batch, idx.tolist(), best.tolist())]
with open(out, "w", newline="") as f:
    csv.writer(f).writerows([("path", "predicted_label", "probability"), *rows])
"""


def model_dir(root: Path, size: int) -> Path:
    import torch
    from torchvision import models

    from mltrain.components.model_directory import save_model_dir

    torch.manual_seed(0)
    names = [f"class_{n}" for n in range(4)]
    save_model_dir(root, {"name": "resnet18"}, names, size, models.resnet18(num_classes=len(names)).state_dict())
    return root


def labels(path: Path) -> Dict[str, str]:
    with open(path) as f:
        return {row["path"]: row["predicted_label"] for row in csv.DictReader(f)}


def main() -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=400)
    p.add_argument("--width", type=int, default=800)
    p.add_argument("--height", type=int, default=600)
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--workers", type=int, default=cpus)
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-score-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home"), "MLTRAIN_TRACKING": "off"}
    try:
        kb = make_photos(work / "photos", a.images, a.width, a.height) / a.images / 1e3
        model = model_dir(work / "model", a.size)
        print(f"{a.images} JPEGs of {a.width}x{a.height} ({kb:.0f} KB each), resnet18 at {a.size} px, "
              f"{a.workers} loader worker(s) for mltrain, {cpus} CPU(s)", flush=True)
        took: Dict[str, List[float]] = {"mltrain": [], "plain": []}
        outs: Dict[str, Path] = {}
        for r in range(a.rounds):
            for side in (["mltrain", "plain"] if r % 2 == 0 else ["plain", "mltrain"]):
                start = time.perf_counter()
                if side == "mltrain":
                    run_id = f"score-{r}"
                    subprocess.run(mltrain_cmd() + ["job=score_image_model", f"job.model_dir={model}",
                                                    f"job.image_dir={work / 'photos'}", f"data.num_workers={a.workers}",
                                                    f"run.id={run_id}"],
                                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
                    outs[side] = work / "home" / "runs" / run_id / "outputs" / "predictions.csv"
                else:
                    outs[side] = work / f"plain-{r}.csv"
                    subprocess.run([sys.executable, "-c", PLAIN, str(model), str(work / "photos"), str(outs[side]), str(a.size)],
                                   cwd=work, env=env, check=True)
                took[side].append(time.perf_counter() - start)
            print(f"round {r + 1}: mltrain {took['mltrain'][-1]:.2f} s  plain {took['plain'][-1]:.2f} s", flush=True)
        ours, theirs = labels(outs["mltrain"]), labels(outs["plain"])
        same = sum(ours[k] == theirs.get(k) for k in ours) / max(1, len(ours))
        ratio = statistics.median(m / q for m, q in zip(took["mltrain"], took["plain"]))
        for side, values in took.items():
            med = statistics.median(values)
            print(f"{side:<8} {med:7.2f} s  {a.images / med:7.1f} img/s   {[round(v, 2) for v in values]}")
        print(f"mltrain / plain (median of the per-round ratios): {ratio:.3f}; same label for {same:.1%} of the images")
        if same < 0.95:
            raise SystemExit("the two sides disagree on more than 5 % of the labels")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
