"""Score Image Model: a trained model directory + an image directory -> outputs/predictions.csv.

One row per image: path, predicted label, probability, and the true label when the image directory is
labelled (what Evaluate Model compares). Images are read through the image transformation Apply Image
Transformation attached to the directory, else the one the model was trained with, else the defaults;
always without random operations. The images come through the trainer's CPU input path (loader workers
decode a JPEG at the reduced size its resize allows, batches stay uint8 until the device normalises them),
on a GPU where the rank has one. Ranks split the images; rank 0 merges.
Run as `python -m mltrain.components.score_image_model` by the launcher.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from omegaconf import OmegaConf

from mltrain.base.atomic import atomic_write
from mltrain.components import data
from mltrain.components import model_directory as models
from mltrain.components.checks import validate_score as validate  # noqa: F401  (the driver's checks: spec.kinds)
from mltrain.components.image_directory import label_of, labelled
from mltrain.components.onnx_export import OnnxModel
from mltrain.components.runtime import RankContext, run_component


def score(ctx: RankContext) -> None:
    import torch  # heavy
    import torch.distributed as dist  # heavy
    from torch.utils.data import DataLoader  # heavy

    from mltrain.components import image_augment, image_cpu, image_input  # heavy

    cfg = ctx.cfg
    model, spec = models.load_model_dir(cfg.job.model_dir)
    onnx = cfg.job.runtime == "onnxruntime"
    if onnx:
        model = OnnxModel(cfg.job.model_dir)
    images = data.list_images(cfg.job.image_dir)
    mine = images[ctx.rank::ctx.world_size]
    size = int(spec.get("image_size") or cfg.data.image_size)
    ops = data.attached_transform(cfg.job.image_dir) or spec.get("image_transformation")
    sized = _with_size(cfg, size)
    # The trainer's CPU input path, for validation: workers decode (a JPEG at the reduced size the resize
    # allows), resize and center-crop, and batch uint8; the batch is normalised where the model runs.
    aug = image_augment.augmentation(sized, False, ops, data.trained_image_size(sized, ops))
    device = torch.device("cuda", ctx.local_rank % torch.cuda.device_count()) \
        if torch.cuda.is_available() and not onnx else torch.device("cpu")
    if not onnx:
        model = model.to(device).eval()
    loader = DataLoader(image_cpu.CpuImages([(str(p), 0) for p in mine], spec["class_names"], aug), batch_size=64,
                        shuffle=False, **image_input.loader_settings(int(cfg.data.num_workers), device.type == "cuda"))
    normalize = image_input.Normalizer(device)
    root = Path(str(cfg.job.image_dir)).expanduser()
    truth = labelled(root)
    rows = []
    done = 0
    with torch.no_grad():
        for x, _ in loader:
            batch = mine[done:done + len(x)]
            done += len(x)
            probs = torch.softmax(model(normalize(x)), dim=1)
            best, idx = probs.max(dim=1)
            for p, i, b in zip(batch, idx.tolist(), best.tolist()):
                row = [str(p), spec["class_names"][i], f"{b:.6f}"]
                if truth:  # the true label, for Evaluate Model
                    row.append(label_of(p.relative_to(root).as_posix()))
                rows.append(tuple(row))
    if ctx.distributed:
        gathered = [None] * ctx.world_size
        dist.all_gather_object(gathered, rows)
        rows = [r for part in gathered for r in part]
    if ctx.is_main:
        rows.sort()
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["path", "predicted_label", "probability", *(["label"] if truth else [])])
        writer.writerows(rows)
        folder = Path(str(cfg.job.output_path)).expanduser() if cfg.job.get("output_path") else ctx.outputs_dir
        folder.mkdir(parents=True, exist_ok=True)
        out = folder / Path(str(cfg.job.predictions_file)).name
        atomic_write(out, buf.getvalue())
        print(f"scored {len(rows)} images with {spec['name']} ({cfg.job.runtime}): {out}", flush=True)


def _with_size(cfg, size: int):
    copy = OmegaConf.create(OmegaConf.to_container(cfg))
    copy.data.image_size = size
    return copy


if __name__ == "__main__":
    run_component(score)
