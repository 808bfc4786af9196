"""Job kinds: what a job is, one registration each.

A kind names its typed schema (the `job` node of the config), the program each rank runs and a line
that describes it. The user's own programs (`script`, `command`) run from a snapshot of
`job.source_directory`; every other kind is a built-in component: a module under mltrain.components
that each rank runs as `python -m MODULE` and whose `validate(cfg)` checks its inputs before anything
is queued. Modules are named, not imported, so this table stays at the bottom of the layers; the
launch layer imports a component's module when a job of that kind is frozen. A new kind is one
`register(...)` line here, its schema in mltrain.jobspec.job_schemas and a preset in conf/job/. A kind
owns the top-level sections its program reads (SECTIONS: the image classifier's model, data and
trainer); a script or a command job has none of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from mltrain.jobspec.computes import builtin_schemas
from mltrain.jobspec.job_schemas import (
    ApplyImageTransformationJobConf,
    CommandJobConf,
    ConvertToImageDirectoryJobConf,
    DataConf,
    EvaluateModelJobConf,
    InitImageTransformationJobConf,
    ModelConf,
    ParallelJobConf,
    ScoreImageModelJobConf,
    ScriptJobConf,
    SplitImageDirectoryJobConf,
    TrainerConf,
    TrainPytorchModelJobConf,
)
from mltrain.jobspec.schema import DistributionConf, EnvironmentConf

#: The programs that are the user's own, not a component module.
USER_PROGRAMS = ("script", "command")

#: Top-level sections that only some kinds have, by name: the kinds that read one name it in `sections`, and
#: their preset selects its option (`override /trainer@_global_.trainer: default`); any other job has none.
SECTIONS: Dict[str, type] = {"model": ModelConf, "data": DataConf, "trainer": TrainerConf}


@dataclass(frozen=True)
class JobKind:
    name: str
    # The dataclass of the `job` node (registered in Hydra's ConfigStore as `<name>_schema`).
    schema: type
    # "script" or "command", or the component module each rank runs with `python -m`.
    program: str
    # One line for `mltrain --help`, the dry run and `runs show`.
    summary: str
    # The SECTIONS its program reads (its preset selects each one's option).
    sections: Tuple[str, ...] = ()
    # A component that runs the user's code too (the parallel job's entry script): its
    # `job.source_directory` is snapshotted and the ranks start in the copy, as a script's do.
    user_code: bool = False

    @property
    def builtin(self) -> bool:
        return self.program not in USER_PROGRAMS


JOB_KINDS: Dict[str, JobKind] = {}


def register(kind: JobKind) -> JobKind:
    JOB_KINDS[kind.name] = kind
    return kind


register(JobKind("script", ScriptJobConf, "script", "a Python script of yours, on each rank (Azure ML's ScriptRunConfig)"))
register(JobKind("command", CommandJobConf, "command", "a shell command line, on each rank (Azure ML's command job)"))
register(JobKind("train_pytorch_model", TrainPytorchModelJobConf, "mltrain.components.train_pytorch_model",
                 "Designer's Train PyTorch Model: a torchvision classifier trained on an image directory",
                 sections=("model", "data", "trainer")))
register(JobKind("score_image_model", ScoreImageModelJobConf, "mltrain.components.score_image_model",
                 "Designer's Score Image Model: a trained model directory scores an image directory",
                 sections=("data",)))  # data.image_size, for a model directory that records no size
register(JobKind("convert_to_image_directory", ConvertToImageDirectoryJobConf,
                 "mltrain.components.convert_to_image_directory",
                 "Designer's Convert to Image Directory: a folder, archive or table of images -> an image directory"))
register(JobKind("init_image_transformation", InitImageTransformationJobConf,
                 "mltrain.components.init_image_transformation",
                 "Designer's Init Image Transformation: resize, crops, flips ... -> an image transformation"))
register(JobKind("apply_image_transformation", ApplyImageTransformationJobConf,
                 "mltrain.components.apply_image_transformation",
                 "Designer's Apply Image Transformation: an image directory read through a transformation"))
register(JobKind("split_image_directory", SplitImageDirectoryJobConf, "mltrain.components.split_image_directory",
                 "Designer's Split Image Directory: two image directories, stratified by label, seeded"))
register(JobKind("evaluate_model", EvaluateModelJobConf, "mltrain.components.evaluate_model",
                 "Designer's Evaluate Model: accuracy, per-class precision/recall/F1, confusion matrix"))
register(JobKind("parallel", ParallelJobConf, "mltrain.parallel.program",
                 "Azure ML's parallel job: an entry script's run(mini_batch) over files or table rows, in workers",
                 user_code=True))


def schemas() -> Dict[str, Dict[str, type]]:
    """Every config group's schemas by option, the job group's from the kinds above (Hydra's ConfigStore
    registers them; the validator refuses keys they lack)."""
    return {
        "job": {name: kind.schema for name, kind in JOB_KINDS.items()},
        "environment": {"environment": EnvironmentConf},
        "compute": dict(builtin_schemas()),
        "distribution": {"distribution": DistributionConf},
        **{name: {name: schema} for name, schema in SECTIONS.items()},
    }
