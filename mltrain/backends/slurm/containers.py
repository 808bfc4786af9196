"""The one builder of container flags on Slurm: pyxis takes the image as srun options, apptainer
wraps each rank program. Both see the run directory's parent and MLTRAIN_HOME at the same paths."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

from mltrain.base.home import mltrain_home
from mltrain.jobspec.slurm_compute import SlurmComputeConf


def container_flags(compute: SlurmComputeConf, environment: Dict[str, Any], run_dir: str) -> Tuple[List[str], List[str]]:
    """(srun arguments, rank program prefix) that run the ranks in environment's docker image."""
    if not environment.get("containerized"):
        return [], []

    image = environment["spec"]["base_image"]
    shared = sorted({str(Path(run_dir).parent), str(mltrain_home())})
    if compute.container_runtime == "apptainer":
        gpu = ["--nv"] if compute.gpus_per_node or compute.gpus_per_task else []
        return [], ["apptainer", "exec", *gpu, "--bind", ",".join(shared), f"docker://{image}"]
    return [f"--container-image={image}", f"--container-mounts={','.join(f'{p}:{p}' for p in shared)}"], []
