"""FrozenJobs built directly from the schema's dataclasses, for unit tests that need no Hydra."""
from __future__ import annotations

from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.local_compute import LocalComputeConf
from mltrain.jobspec.schema import DistributionConf
from mltrain.jobspec.slurm_compute import SlurmComputeConf


def frozen_job(backend: str = "local", nodes: int = 1, per_node: int = 2, **overrides) -> FrozenJob:
    compute = SlurmComputeConf(partition="debug", timeout_min=30, cpus_per_task=2) if backend == "slurm" \
        else LocalComputeConf()
    fields = dict(
        run_id="r1", run_dir="/runs/r1", experiment="exp", backend=backend, compute=compute,
        distribution=DistributionConf(kind="pytorch", node_count=nodes, process_count_per_node=per_node),
        process_group="gloo", argv=["/usr/bin/python3", "train.py", "--rank", "$RANK", "--url",
                                     "${AZ_BATCHAI_PYTORCH_INIT_METHOD}", "$NOT_A_VAR"],
        cwd="/src", env={"AML_PARAMETER_lr": "0.1"}, overrides=["a=1"],
    )
    fields.update(overrides)
    return FrozenJob(**fields)
