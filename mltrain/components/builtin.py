"""The Designer's built-in components by name: what an Azure ML file that references one becomes here.

An Azure ML v2 pipeline names a built-in component (`component: azureml:convert_to_image_directory@latest`,
`azureml://registries/azureml/components/train_pytorch_model/versions/1`) and wires its ports by name. This
table says, for each name, which mltrain job kind runs it, which job key takes each input port's path and
each output port's folder, and which key each parameter sets; `resolve` reads the reference forms and
`overrides` turns one use of a component into the overrides of a pipeline step.

Port and parameter names are the Designer's display names in snake_case ("Input image directory" ->
`input_image_directory`), and where Azure's published module takes the value as a flag, that flag's name
(`--input-path`, `--fraction`). Pure data and the standard library: the front ends import it freely.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from mltrain.base.errors import ConfigError


@dataclass(frozen=True)
class Port:
    # Azure's port name, and the Designer's type of what flows through it.
    name: str
    type: str
    # The job key that takes the port's path. Null for an output the component always writes to one folder
    # of its run's outputs (`folder`), as Train PyTorch Model writes outputs/model.
    key: Optional[str]
    folder: Optional[str] = None
    optional: bool = False


@dataclass(frozen=True)
class Parameter:
    name: str
    # The mltrain key it sets (a job key, or a trainer key for Train PyTorch Model).
    key: str
    type: str
    default: Any = None


@dataclass(frozen=True)
class BuiltinComponent:
    name: str
    display_name: str
    # The mltrain job kind (mltrain.jobspec.kinds) that runs it.
    job: str
    inputs: Tuple[Port, ...]
    outputs: Tuple[Port, ...]
    parameters: Tuple[Parameter, ...] = ()
    # Overrides every use of it carries (Train PyTorch Model reads its images from folders).
    fixed: Tuple[str, ...] = field(default_factory=tuple)


def _p(name: str, key: str, type_: str, default: Any = None) -> Parameter:
    return Parameter(name, key, type_, default)


_INIT_SWITCHES = ("resize", "center_crop", "pad", "color_jitter", "grayscale", "random_resized_crop", "random_crop",
                  "random_horizontal_flip", "random_vertical_flip", "random_rotation", "random_affine",
                  "random_grayscale", "random_perspective")
_INIT_SIZES = (("size", 256), ("crop_size", 224), ("padding", 0), ("random_resized_crop_size", 256),
               ("random_crop_size", 224), ("random_rotation_degrees", 0), ("random_affine_degrees", 0))

COMPONENTS: Dict[str, BuiltinComponent] = {c.name: c for c in (
    BuiltinComponent(
        "convert_to_image_directory", "Convert to Image Directory", "convert_to_image_directory",
        inputs=(Port("input_dataset", "AnyDirectory", "job.input_path"),),
        outputs=(Port("output_image_directory", "ImageDirectory", "job.output_path", "image_directory"),)),
    BuiltinComponent(
        "init_image_transformation", "Init Image Transformation", "init_image_transformation",
        inputs=(),
        outputs=(Port("output_image_transformation", "TransformationDirectory", "job.output_path",
                      "image_transformation"),),
        parameters=tuple(_p(s, f"job.{s}", "boolean", False) for s in _INIT_SWITCHES)
        + tuple(_p(s, f"job.{s}", "integer", d) for s, d in _INIT_SIZES)),
    BuiltinComponent(
        "apply_image_transformation", "Apply Image Transformation", "apply_image_transformation",
        inputs=(Port("input_image_transformation", "TransformationDirectory", "job.input_transform_path"),
                Port("input_image_directory", "ImageDirectory", "job.input_image_path")),
        outputs=(Port("output_image_directory", "ImageDirectory", "job.output_path", "image_directory"),),
        parameters=(_p("mode", "job.mode", "enum: For training, For inference"),)),
    BuiltinComponent(
        "split_image_directory", "Split Image Directory", "split_image_directory",
        inputs=(Port("input_image_directory", "ImageDirectory", "job.src_path"),),
        outputs=(Port("output_image_directory1", "ImageDirectory", "job.tgt_train_path", "image_directory_1"),
                 Port("output_image_directory2", "ImageDirectory", "job.tgt_test_path", "image_directory_2")),
        # `fraction` is Azure's; its split always seeds with 42, so `random_seed` is mltrain's own addition
        parameters=(_p("fraction", "job.fraction", "number", 0.9), _p("random_seed", "job.seed", "integer", 42))),
    BuiltinComponent(
        "train_pytorch_model", "Train PyTorch Model", "train_pytorch_model",
        inputs=(Port("untrained_model", "UntrainedModelDirectory", "job.untrained_model_dir", optional=True),
                Port("training_data", "ImageDirectory", "data.train_dir"),
                Port("validation_data", "ImageDirectory", "data.val_dir")),
        outputs=(Port("trained_model", "ModelDirectory", None, "model"),),
        parameters=(_p("epochs", "trainer.epochs", "integer", 5), _p("batch_size", "trainer.batch_size", "integer", 16),
                    _p("warmup_step_number", "trainer.warmup_epochs", "integer", 0),
                    _p("learning_rate", "trainer.learning_rate", "number", 0.001),
                    _p("random_seed", "trainer.seed", "integer", 1), _p("patience", "trainer.patience", "integer", 3),
                    _p("print_frequency", "trainer.print_frequency", "integer", 10)),
        fixed=("data=image_directory",)),
    BuiltinComponent(
        "score_image_model", "Score Image Model", "score_image_model",
        inputs=(Port("trained_model", "ModelDirectory", "job.model_dir"),
                Port("dataset", "ImageDirectory", "job.image_dir")),
        outputs=(Port("scored_dataset", "DataFrameDirectory", "job.output_path"),)),
    BuiltinComponent(
        "evaluate_model", "Evaluate Model", "evaluate_model",
        inputs=(Port("scored_dataset", "DataFrameDirectory", "job.scored_dataset"),),
        outputs=(Port("evaluation_results", "DataFrameDirectory", "job.output_path", "evaluation"),)),
)}

#: `azureml:NAME`, `azureml:NAME@latest`, `azureml:NAME:VERSION`, and the registry's
#: `azureml://registries/azureml/components/NAME[/versions/V | /labels/L]`.
_REFERENCE = re.compile(r"^(?:azureml:(?://registries/azureml/components/)?)?(?P<name>[A-Za-z0-9_.-]+?)"
                        r"(?:@[A-Za-z0-9_.-]+|:[A-Za-z0-9_.-]+|/versions/[^/]+|/labels/[^/]+)?$")


def resolve(reference: str, key: str = "component") -> BuiltinComponent:
    """The built-in component a reference names, or one line listing the names there are."""
    match = _REFERENCE.match(str(reference).strip())
    found = COMPONENTS.get(match.group("name")) if match else None
    if found is None:
        raise ConfigError(key, f"'{reference}' is not a built-in component", sorted(COMPONENTS))
    return found


def overrides(component: BuiltinComponent, inputs: Mapping[str, str], outputs: Mapping[str, str],
              parameters: Mapping[str, Any], key: str = "component") -> List[str]:
    """The overrides of one use of `component`: its job kind, its fixed overrides, each input port's path,
    each output port's folder and each parameter, by Azure's names; an unknown name is one line."""
    result = [f"job={component.job}", *component.fixed]
    known_in = {p.name: p for p in component.inputs}
    for name, path in inputs.items():
        if name not in known_in:
            raise ConfigError(f"{key}.inputs.{name}", "not an input of " + component.display_name, list(known_in))
        result.append(f"{known_in[name].key}={path}")
    missing = [p.name for p in component.inputs if not p.optional and p.name not in inputs]
    if missing:
        raise ConfigError(f"{key}.inputs.{missing[0]}", f"{component.display_name} needs this input")
    known_out = {p.name: p for p in component.outputs}
    for name, path in outputs.items():
        if name not in known_out:
            raise ConfigError(f"{key}.outputs.{name}", "not an output of " + component.display_name, list(known_out))
        if known_out[name].key is not None:
            result.append(f"{known_out[name].key}={path}")
    known = {p.name: p for p in component.parameters}
    for name, value in parameters.items():
        if name not in known:
            raise ConfigError(f"{key}.{name}", "not a parameter of " + component.display_name, list(known))
        result.append(f"{known[name].key}={_value(value)}")
    return result


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value)
    return f"'{text}'" if any(c in text for c in " ,=") else text
