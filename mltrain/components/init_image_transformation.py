"""Init Image Transformation: the Designer's transformation parameters -> an image transformation folder.

Writes `image_transformation.json` (mltrain.components.image_transformation) that Apply Image
Transformation attaches to an image directory. Run as a job (`mltrain job=init_image_transformation
job.resize=true job.size=64`) or as Azure's module (`python -m azureml.designer.modules.computer_vision.
transform.init_image_transformation.init_image_transformation --resize True --size 64 --output-path ...`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict

from mltrain.components import image_transformation as transformation
from mltrain.components.runtime import run_component

OUTPUT = "image_transformation"


def validate(cfg: Any) -> None:
    """The driver's checks before anything is queued (spec.kinds): each switched-on size is usable."""
    transformation.check_parameters(_values(cfg.job))


def _values(job: Any) -> Dict[str, Any]:
    return {name: job.get(name) for switch, _op, size in transformation.PARAMETERS for name in (switch, size) if name}


def init(values: Dict[str, Any], output_path: Any, log: Callable[[str], None] = print) -> list:
    transformation.check_parameters(values)
    ops = transformation.from_parameters(values)
    transformation.write_spec(Path(str(output_path)).expanduser(), ops)
    log(f"Init Image Transformation: {ops or 'no operations'} -> {output_path}")
    return ops


def body(ctx: Any) -> None:
    if ctx.is_main:
        init(_values(ctx.cfg.job), ctx.cfg.job.output_path or ctx.outputs_dir / OUTPUT)


if __name__ == "__main__":
    run_component(body)
