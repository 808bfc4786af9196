"""Throughput of the built-in trainer (job=train_pytorch_model) against a plain hand-written PyTorch
loop: same torchvision model, bundled data, transforms, batch size and threads; one run, alternating.

Reports train images/second of the last epoch (the first warms caches up) and the ratio.
Usage: .venv/bin/python benchmarks/bench_trainer.py [--epochs 3] [--repeats 5]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent


def mltrain_rate(env, work, epochs, batch, size) -> float:
    subprocess.run([str(BIN / "mltrain"), f"trainer.epochs={epochs}", f"trainer.batch_size={batch}",
                    f"data.image_size={size}", "trainer.patience=100", "trainer.print_frequency=1000"],
                   cwd=work, env=env, check=True, stdout=subprocess.DEVNULL)
    runs = sorted((Path(env["MLTRAIN_HOME"]) / "runs").glob("train_pytorch_model_*"), key=os.path.getmtime)
    rows = [json.loads(l) for l in (runs[-1] / "metrics.jsonl").read_text().splitlines()]
    return [r["value"] for r in rows if r["name"] == "train_images_per_second" and r["step"] == epochs][0]


def plain_rate(env, work, train_dir, epochs, batch, size) -> float:
    out = subprocess.run([sys.executable, str(HERE / "assets" / "plain_loop.py"), str(train_dir), str(epochs),
                          str(batch), str(size)], cwd=work, env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--size", type=int, default=32)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-"))
    env = {**os.environ, "MLTRAIN_HOME": str(work / "home")}
    sys.path.insert(0, str(HERE.parent))
    os.environ["MLTRAIN_HOME"] = env["MLTRAIN_HOME"]
    from mltrain.components.data import sample_dirs

    train_dir, _ = sample_dirs()
    ml, pl = [], []
    for _ in range(a.repeats):
        ml.append(mltrain_rate(env, work, a.epochs, a.batch, a.size))
        pl.append(plain_rate(env, work, train_dir, a.epochs, a.batch, a.size))
    m, q = statistics.median(ml), statistics.median(pl)
    print(f"resnet18, bundled digits at {a.size}px, batch {a.batch}, {os.cpu_count()} CPUs, epoch {a.epochs} of {a.epochs}")
    print(f"built-in trainer {m:.1f} img/s   plain PyTorch loop {q:.1f} img/s   ratio {m / q:.3f}  (target >= 0.98)")
    print(f"runs: trainer {[round(x, 1) for x in ml]}  plain {[round(x, 1) for x in pl]}")


if __name__ == "__main__":
    main()
