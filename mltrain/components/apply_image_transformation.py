"""Apply Image Transformation: an image transformation + an image directory -> an image directory that is
read through that transformation, "For training" (every operation) or "For inference" (no random ones).

The images are linked, not rewritten (mltrain.components.image_directory.place), and the chosen
operations go into the output's metadata; Train PyTorch Model and Score Image Model read the images
through them. Run as a job (`mltrain job=apply_image_transformation job.mode="For training" ...`) or as
Azure's module (`python -m azureml.designer.modules.computer_vision.transform.apply_image_transformation.
apply_image_transformation --mode "For training" --input-transform-path ... --input-image-path ...
--output-path ...`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict

from mltrain.base.digest import file_sha256
from mltrain.base.errors import ConfigError
from mltrain.components import image_directory as imgdir
from mltrain.components import image_transformation as transformation
from mltrain.components.checks import later
from mltrain.components.runtime import run_component

OUTPUT = "image_directory"
PLACED = {"hardlink": "hard-linked", "symlink": "symlinked", "copy": "copied"}


def validate(cfg: Any) -> None:
    """The driver's checks before anything is queued (spec.kinds)."""
    job = cfg.job
    if job.mode not in transformation.MODES:
        raise ConfigError("job.mode", f"'{job.mode}' is not a mode", ["For training", "For inference"])
    if job.link not in imgdir.LINK_MODES:
        raise ConfigError("job.link", f"'{job.link}' is not a way to place images", imgdir.LINK_MODES)
    if not later(job.input_transform_path):
        transformation.read_spec(job.input_transform_path, "job.input_transform_path")
    if not later(job.input_image_path) and not Path(str(job.input_image_path)).expanduser().is_dir():
        raise ConfigError("job.input_image_path", f"directory '{job.input_image_path}' does not exist")


def copy_directory(source: Path, target: Path, link: str, **changes: Any) -> Dict[str, Any]:
    """Place every image of `source` under `target` (built aside, renamed into place) with its metadata
    updated by `changes`; returns the new metadata."""
    entries, tmp = [], imgdir.staging(target)
    try:
        done = set()
        for relative, path in imgdir.images_of(source):
            done.add(imgdir.place(path, tmp / relative, link))
            entries.append((relative, file_sha256(path)))
        old = imgdir.read_meta(source) or {}
        extra = {k: v for k, v in old.items() if k not in ("format", "version", "labelled", "classes", "counts",
                                                            "images", "digest")}
        meta = imgdir.describe(entries, **{**extra, **changes})
        imgdir.write_meta(tmp, meta)
        imgdir.publish(tmp, target)
    except BaseException:
        imgdir.discard(tmp)
        raise
    meta["placed"] = sorted(done)
    return meta


def apply(mode: str, input_transform_path: Any, input_image_path: Any, output_path: Any, link: str = "hardlink",
          log: Callable[[str], None] = print) -> Dict[str, Any]:
    if mode not in transformation.MODES:
        raise ConfigError("job.mode", f"'{mode}' is not a mode", ["For training", "For inference"])
    ops = transformation.read_spec(input_transform_path, "job.input_transform_path")
    source = Path(str(input_image_path)).expanduser()
    if not source.is_dir():
        raise ConfigError("job.input_image_path", f"directory '{source}' does not exist")
    chosen = transformation.for_mode(ops, mode)
    mode_name = transformation.MODES[mode]
    meta = copy_directory(source, Path(str(output_path)).expanduser(), link,
                          transform={"mode": mode_name, "transforms": chosen})
    dropped = len(ops) - len(chosen)
    log(f"Apply Image Transformation ({mode_name}): {meta['images']} images read through {chosen or 'no operations'}"
        f"{f' ({dropped} random operations dropped)' if dropped else ''}; images "
        f"{', '.join(PLACED[p] for p in meta['placed'])} -> {output_path}")
    return meta


def body(ctx: Any) -> None:
    if ctx.is_main:
        job = ctx.cfg.job
        apply(job.mode, job.input_transform_path, job.input_image_path, job.output_path or ctx.outputs_dir / OUTPUT,
              job.link)


if __name__ == "__main__":
    run_component(body)
