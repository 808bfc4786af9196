"""Convert to Image Directory on an archive of 10,000 small JPEGs, against what a user would otherwise run:
a plain `zipfile` extract followed by a `torchvision.datasets.ImageFolder` scan of the result.

Each side runs in a fresh process (its peak resident memory is its own), alternating. Two clocks: the whole
process as a user runs it (interpreter, imports: the baseline needs torchvision for ImageFolder, the
converter only Pillow), and the work alone (imports outside the clock). mltrain's side decodes every image
(a corrupt one is skipped, not found hours later in training), hashes it and writes the metadata; the
baseline only copies bytes and lists files. Prints the medians of the pair ratios and each side's peak memory.

Usage: .venv/bin/python benchmarks/bench_image_directory.py [--images 10000] [--repeats 5]
"""
from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

CHILD = {
    "mltrain": """
import json, resource, sys, time
from mltrain.components.convert_to_image_directory import convert
start = time.perf_counter()
meta = convert(sys.argv[1], sys.argv[2], log=lambda line: None)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "images": meta["images"], "classes": len(meta["classes"]),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
    "baseline": """
import json, resource, sys, time, zipfile
from torchvision.datasets import ImageFolder
start = time.perf_counter()
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2])
data = ImageFolder(sys.argv[2] + "/data/train")
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "images": len(data), "classes": len(data.classes),
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""",
}


def make_archive(path: Path, images: int) -> None:
    """Small real-looking JPEGs: the bundled digits, enlarged to 32x32, ten classes under data/train/."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(path, "w") as z:
        for n in range(images):
            i = n % len(digits.images)
            pixels = (digits.images[i] * 15 + rng.integers(0, 16, (8, 8))).clip(0, 255).astype("uint8")
            buf = io.BytesIO()
            Image.fromarray(pixels, mode="L").resize((32, 32)).convert("RGB").save(buf, "JPEG", quality=90)
            z.writestr(f"data/train/{digits.target[i]}/{n:05d}.jpg", buf.getvalue())


def run(side: str, archive: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD[side], str(archive), str(out)], capture_output=True, text=True,
                          check=True)
    whole = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "whole": whole}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mltrain-bench-images-"))
    try:
        archive = work / "photos.zip"
        make_archive(archive, a.images)
        print(f"archive: {a.images} JPEGs, {archive.stat().st_size / 1e6:.1f} MB")
        results = {"mltrain": [], "baseline": []}
        for r in range(a.repeats):
            for side in (("mltrain", "baseline") if r % 2 == 0 else ("baseline", "mltrain")):
                results[side].append(run(side, archive, work / side))
            m, b = results["mltrain"][-1], results["baseline"][-1]
            print(f"pair {r + 1}: whole process mltrain {m['whole']:.2f} s / zipfile+ImageFolder {b['whole']:.2f} s = "
                  f"{m['whole'] / b['whole']:.2f}; work alone {m['seconds']:.2f} s / {b['seconds']:.2f} s = "
                  f"{m['seconds'] / b['seconds']:.2f}; peak {m['peak_mb']:.0f} MB / {b['peak_mb']:.0f} MB")
        assert {(x["images"], x["classes"]) for side in results.values() for x in side} == {(a.images, 10)}
        peak = {s: max(x["peak_mb"] for x in v) for s, v in results.items()}
        for clock, label in (("whole", "whole process"), ("seconds", "work alone")):
            ratios = [m[clock] / b[clock] for m, b in zip(results["mltrain"], results["baseline"])]
            med = {s: statistics.median(x[clock] for x in v) for s, v in results.items()}
            print(f"{label}: median mltrain {med['mltrain']:.2f} s / zipfile+ImageFolder {med['baseline']:.2f} s; "
                  f"median of pair ratios {statistics.median(ratios):.2f} (target <= 1.0)")
        # The converter's decoding workers are the forkserver's children, not this one's: `ps` shows them
        print(f"peak memory: mltrain's process {peak['mltrain']:.0f} MB (target < 200 MB; plus its decoding workers), "
              f"baseline {peak['baseline']:.0f} MB")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
