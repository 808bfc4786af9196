"""Split Image Directory: one image directory -> two, by a fraction, stratified by label and seeded.

As Azure's component does, the split is scikit-learn's `train_test_split` with `stratify=` the labels
(each class keeps its share in both outputs) and a fixed `random_state` (Azure's 42 is the default seed);
an unlabelled directory, or one whose classes are too small to stratify, is split at random, saying so.
The outputs link the input's images (mltrain.components.image_directory.place) and keep its metadata,
the attached transformation included. Run as a job (`mltrain job=split_image_directory job.src_path=...
job.fraction=0.8`) or as Azure's module (`python -m azureml.designer.modules.computer_vision.preprocess.
split_image_directory.split_image_directory --src-path ... --tgt-train-path ... --tgt-test-path ...`).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

from mltrain.base.digest import file_sha256
from mltrain.base.errors import ConfigError
from mltrain.components import image_directory as imgdir
from mltrain.components.checks import later
from mltrain.components.designer_errors import InvalidDatasetError
from mltrain.components.runtime import run_component

OUTPUTS = ("image_directory_1", "image_directory_2")


def validate(cfg: Any) -> None:
    """The driver's checks before anything is queued (spec.kinds)."""
    job = cfg.job
    if not 0.0 < float(job.fraction) < 1.0:
        raise ConfigError("job.fraction", f"must be between 0 and 1 (exclusive), got {job.fraction}")
    if job.link not in imgdir.LINK_MODES:
        raise ConfigError("job.link", f"'{job.link}' is not a way to place images", imgdir.LINK_MODES)
    if not later(job.src_path) and not Path(str(job.src_path)).expanduser().is_dir():
        raise ConfigError("job.src_path", f"directory '{job.src_path}' does not exist")


def choose(relatives: List[str], labels: List[Any], fraction: float, seed: int) -> Tuple[List[int], List[int], bool]:
    """(indices of the first output, of the second, whether stratified): scikit-learn's split, as Azure's."""
    from sklearn.model_selection import train_test_split  # heavy

    n = len(relatives)
    if n < 2:
        raise InvalidDatasetError(f"a directory of {n} image(s) cannot be split in two")
    if not 1.0 / n <= fraction <= 1 - 1.0 / n:
        raise ConfigError("job.fraction", f"{fraction} leaves one output empty for {n} images (allowed: "
                                          f"{1.0 / n:.4g} to {1 - 1.0 / n:.4g})")
    index = list(range(n))
    if None not in labels:
        try:
            first, second = train_test_split(index, train_size=fraction, random_state=seed, stratify=labels)
            return sorted(first), sorted(second), True
        except ValueError:
            pass  # a class too small for both sides: Azure splits at random then, and so does this
    first, second = train_test_split(index, train_size=fraction, random_state=seed)
    return sorted(first), sorted(second), False


def _write(source: Path, target: Path, chosen: List[Tuple[str, Path]], link: str, extra: Dict[str, Any]) -> Dict:
    tmp = imgdir.staging(target)
    try:
        entries = []
        for relative, path in chosen:
            imgdir.place(path, tmp / relative, link)
            entries.append((relative, file_sha256(path)))
        meta = imgdir.describe(entries, **extra)
        imgdir.write_meta(tmp, meta)
        imgdir.publish(tmp, target)
        return meta
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def split(src_path: Any, tgt_train_path: Any, tgt_test_path: Any, fraction: float = 0.9, seed: int = 42,
          link: str = "hardlink", log: Callable[[str], None] = print) -> Tuple[Dict, Dict]:
    source = Path(str(src_path)).expanduser()
    if not source.is_dir():
        raise ConfigError("job.src_path", f"directory '{source}' does not exist")
    images = list(imgdir.images_of(source))
    labels = [imgdir.label_of(r) for r, _ in images] if imgdir.labelled(source) else [None] * len(images)
    first, second, stratified = choose([r for r, _ in images], labels, float(fraction), int(seed))
    old = imgdir.read_meta(source) or {}
    extra = {k: v for k, v in old.items() if k in ("transform", "source")}
    metas = []
    for target, picked, share in ((tgt_train_path, first, fraction), (tgt_test_path, second, 1 - float(fraction))):
        metas.append(_write(source, Path(str(target)).expanduser(), [images[i] for i in picked], link,
                            {**extra, "split": {"fraction": round(float(share), 6), "seed": int(seed),
                                                "stratified": stratified}}))
    how = "stratified by label" if stratified else "at random (unlabelled, or a class too small to stratify)"
    log(f"Split Image Directory: {len(first)} + {len(second)} images, {how}, seed {seed} -> {tgt_train_path}, "
        f"{tgt_test_path}")
    return metas[0], metas[1]


def body(ctx: Any) -> None:
    if ctx.is_main:
        job = ctx.cfg.job
        split(job.src_path, job.tgt_train_path or ctx.outputs_dir / OUTPUTS[0],
              job.tgt_test_path or ctx.outputs_dir / OUTPUTS[1], job.fraction, job.seed, job.link)


if __name__ == "__main__":
    run_component(body)
