"""Helpers for the image pipeline's tests: labelled photos made from scikit-learn's real digit scans, packed
as the archives and tables users bring to Convert to Image Directory."""
from __future__ import annotations

import csv
import io
import json
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, Iterator, Tuple


def photos(classes=(0, 1, 2), per_class: int = 10, fmt: str = "PNG") -> Iterator[Tuple[str, int, bytes]]:
    """(label, index, encoded image) of real 8x8 digit scans, enlarged to 16x16 RGB."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for c in classes:
        for j, i in enumerate(np.flatnonzero(digits.target == c)[:per_class]):
            image = Image.fromarray((digits.images[i] * 15).astype("uint8"), mode="L").resize((16, 16)).convert("RGB")
            buf = io.BytesIO()
            image.save(buf, fmt)
            yield str(c), j, buf.getvalue()


def write_zip(path: Path, members: Dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def write_tar(path: Path, members: Dict[str, bytes], mode: str) -> Path:
    with tarfile.open(path, mode) as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return path


def labelled_members(top: str = "photos/", **kwargs) -> Dict[str, bytes]:
    return {f"{top}{label}/{j}.png": data for label, j, data in photos(**kwargs)}


def write_table(folder: Path, name: str = "labels.csv") -> Path:
    """A CSV of (image path, label) beside flat image files, as exported from a labelling tool."""
    (folder / "img").mkdir(parents=True)
    rows = []
    for label, j, data in photos():
        (folder / "img" / f"{label}_{j}.png").write_bytes(data)
        rows.append((f"img/{label}_{j}.png", f"digit-{label}"))
    with open(folder / name, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image", "label"])
        writer.writerows(rows)
    return folder / name


def meta(directory: Path) -> dict:
    return json.loads((directory / "image_directory.json").read_text())


def counts_on_disk(directory: Path) -> Dict[str, int]:
    return {d.name: len([f for f in d.rglob("*") if f.is_file()]) for d in sorted(directory.iterdir()) if d.is_dir()}
