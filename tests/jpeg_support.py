"""A small image folder of photograph-like JPEGs (gradients and noise, real-size), made with PIL."""
from __future__ import annotations

from pathlib import Path


def write_jpegs(root: Path, classes=(0, 1), per_class: int = 4, size=(800, 600), seed: int = 0) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    w, h = size
    y, x = np.mgrid[0:h, 0:w].astype("float32")
    for c in classes:
        out = root / str(c)
        out.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            phase = rng.uniform(0, 6.28)
            base = np.stack([x * 255 / w, y * 255 / h, 128 + 100 * np.sin(x / 37.0 + y / 23.0 + phase)], -1)
            pixels = base * (0.6 + 0.1 * c) + rng.normal(0, 12, (h, w, 3))
            Image.fromarray(pixels.clip(0, 255).astype("uint8")).save(out / f"{i}.jpg", quality=88)
    return root
