"""Azure ML's built-in (Designer) components a v2 pipeline names by `azureml:NAME@latest` or
`azureml://registries/azureml/components/NAME/...`, resolved to mltrain's own job kinds.

The table of built-in components lives with the components (mltrain.components.builtin, when that
module exists: name -> job kind, ports and parameters); the two that mltrain has always had are
described here too, so a pipeline can name them either way.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Dict, Optional


@dataclass(frozen=True)
class BuiltinComponent:
    name: str
    job: str                                               # the mltrain job kind (`job=...`)
    # input port -> the config key that receives its path (a `${inputs.PORT}` value)
    inputs: Dict[str, str] = field(default_factory=dict)
    # output port -> what the component writes there, under the run's outputs folder
    outputs: Dict[str, str] = field(default_factory=dict)
    # parameter -> the config key it sets
    parameters: Dict[str, str] = field(default_factory=dict)
    # groups a step of this component chooses besides `job=`
    groups: tuple = ()


#: Port and parameter names of the Designer's reference pages ("Train PyTorch Model", "Score Image Model").
KNOWN: Dict[str, BuiltinComponent] = {
    "train_pytorch_model": BuiltinComponent(
        "train_pytorch_model", "train_pytorch_model",
        inputs={"untrained_model": "job.untrained_model_dir", "training_data": "data.train_dir",
                "validation_data": "data.val_dir"},
        outputs={"trained_model": "model"},
        parameters={"epochs": "trainer.epochs", "batch_size": "trainer.batch_size",
                    "warmup_step_number": "trainer.warmup_epochs", "learning_rate": "trainer.learning_rate",
                    "random_seed": "trainer.seed", "patience": "trainer.patience",
                    "print_frequency": "trainer.print_frequency"},
        groups=("data=image_directory",)),
    "score_image_model": BuiltinComponent(
        "score_image_model", "score_image_model",
        inputs={"trained_model": "job.model_dir", "dataset": "job.image_dir"},
        outputs={"scored_dataset": "predictions.csv"}),
}


def lookup(name: str) -> Optional[BuiltinComponent]:
    """A built-in component by its Azure name (Designer names use _ or -, any case)."""
    key = name.lower().replace("-", "_")
    table = dict(KNOWN)
    try:
        extra = importlib.import_module("mltrain.components.builtin")
    except ModuleNotFoundError:
        extra = None
    for entry in getattr(extra, "BUILTIN", {}).values() if extra is not None else ():
        table[str(entry.name)] = BuiltinComponent(
            str(entry.name), str(entry.job), dict(getattr(entry, "inputs", {})), dict(getattr(entry, "outputs", {})),
            dict(getattr(entry, "parameters", {})), tuple(getattr(entry, "groups", ())))
    return table.get(key)
