"""Typed schemas of the `job` config group, one per job kind (mltrain.jobspec.kinds registers each with its
rank program). Like mltrain.jobspec.schema, of which they are the job part, they import nothing but the
standard library, so a rank rebuilds them without Hydra or OmegaConf.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from mltrain.jobspec.schema import MISSING

# ----------------------------------------------------------------------------------------- job
# `kind` tells the launcher which rank program a job becomes (mltrain.launch.programs); it is fixed per preset.


@dataclass
class ScriptJobConf:
    """Azure ML's ScriptRunConfig: run a Python script as-is, one process per rank."""

    kind: str = "script"
    source_directory: str = "."
    script: str = MISSING
    # Each item is one argv entry; $VARS (e.g. $AZ_BATCHAI_TASK_INDEX) are expanded in each rank.
    arguments: List[Any] = field(default_factory=list)
    # Exported to every rank as AML_PARAMETER_<name> (MpiStep/PythonScriptStep `params`).
    params: Dict[str, Any] = field(default_factory=dict)
    # Azure ML v1 estimator parameters, mapped onto the keys above and the other groups (mltrain.config.aliases).
    entry_script: Optional[str] = None
    script_params: Dict[str, Any] = field(default_factory=dict)
    use_gpu: Optional[bool] = None
    pip_packages: List[str] = field(default_factory=list)
    conda_packages: List[str] = field(default_factory=list)
    distributed_backend: Optional[str] = None


@dataclass
class CommandJobConf:
    """Azure ML's command job / CommandStep: an arbitrary shell command line, one per rank."""

    kind: str = "command"
    source_directory: str = "."
    # Any, not str: Hydra reads `job.command=true` as a boolean, which a str field would turn into "True".
    command: Any = MISSING
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainPytorchModelJobConf:
    """The Designer's Train PyTorch Model: model, data and trainer come from their own groups."""

    kind: str = "train_pytorch_model"
    # The Designer's UntrainedModelDirectory; when set it replaces the `model` group.
    untrained_model_dir: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ScoreImageModelJobConf:
    """The Designer's Score Image Model: a trained model directory + an image directory."""

    kind: str = "score_image_model"
    model_dir: str = MISSING
    image_dir: str = MISSING
    predictions_file: str = "predictions.csv"
    # pytorch | onnxruntime (the model directory's model.onnx, through ONNX Runtime on the CPU)
    runtime: str = "pytorch"
    # The folder predictions_file goes to; null: the run's outputs/ (a pipeline names one: ${outputs.NAME}).
    output_path: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ConvertToImageDirectoryJobConf:
    """The Designer's Convert to Image Directory: a folder, an archive or a table -> a labelled image directory."""

    kind: str = "convert_to_image_directory"
    # A folder, a .zip/.tar/.tar.gz/.tgz/.tar.bz2/.gz/.bz2 archive, or a .csv/.tsv/.parquet table of image paths.
    input_path: str = MISSING
    # Where the image directory goes; null: <run>/outputs/image_directory.
    output_path: Optional[str] = None
    # A table's image-path and label columns; null: the first of path/image/file... and label/class/category.
    path_column: Optional[str] = None
    label_column: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class InitImageTransformationJobConf:
    """The Designer's Init Image Transformation: its switches and sizes -> an image transformation."""

    kind: str = "init_image_transformation"
    output_path: Optional[str] = None
    # Azure's parameters and their published defaults (each operation off until switched on).
    resize: bool = False
    size: int = 256
    center_crop: bool = False
    crop_size: int = 224
    pad: bool = False
    padding: int = 0
    color_jitter: bool = False
    grayscale: bool = False
    random_resized_crop: bool = False
    random_resized_crop_size: int = 256
    random_crop: bool = False
    random_crop_size: int = 224
    random_horizontal_flip: bool = False
    random_vertical_flip: bool = False
    random_rotation: bool = False
    random_rotation_degrees: int = 0
    random_affine: bool = False
    random_affine_degrees: int = 0
    random_grayscale: bool = False
    random_perspective: bool = False
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class ApplyImageTransformationJobConf:
    """The Designer's Apply Image Transformation: a transformation + an image directory -> an image directory."""

    kind: str = "apply_image_transformation"
    # "For training" (every operation) | "For inference" (the random ones dropped)
    mode: str = MISSING
    input_transform_path: str = MISSING
    input_image_path: str = MISSING
    output_path: Optional[str] = None
    # How images reach the output: hardlink (copy where the file system refuses) | symlink | copy
    link: str = "hardlink"
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SplitImageDirectoryJobConf:
    """The Designer's Split Image Directory: one image directory -> two, stratified by label, seeded."""

    kind: str = "split_image_directory"
    src_path: str = MISSING
    # null: <run>/outputs/image_directory_1 and image_directory_2
    tgt_train_path: Optional[str] = None
    tgt_test_path: Optional[str] = None
    # The share of images in the first output (Azure's default 0.9) and the split's seed (Azure's fixed 42).
    fraction: float = 0.9
    seed: int = 42
    link: str = "hardlink"
    params: Dict[str, Any] = field(default_factory=dict)


@dataclass
class EvaluateModelJobConf:
    """The Designer's Evaluate Model, for classification: scored images against their true labels."""

    kind: str = "evaluate_model"
    # Score Image Model's predictions.csv, or the folder holding it.
    scored_dataset: str = MISSING
    # null: <run>/outputs/evaluation
    output_path: Optional[str] = None
    params: Dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------- sections of the Designer's kinds
# Train PyTorch Model's `model`, `data` and `trainer` (Score Image Model reads `data`): top-level sections
# that only the kinds naming them in mltrain.jobspec.kinds have, each typed by its presets' `<name>_schema`.


@dataclass
class ModelConf:
    # A torchvision classification builder name (resnet18, densenet121, ...).
    name: str = "resnet18"
    # Load weights from `weights` or the torch hub cache; never downloads.
    pretrained: bool = False
    weights: Optional[str] = None
    # DenseNet only: checkpointed dense layers (less memory, slower).
    memory_efficient: bool = False


@dataclass
class DataConf:
    # sample (bundled, real) | image_directory
    kind: str = "sample"
    train_dir: Optional[str] = None
    val_dir: Optional[str] = None
    image_size: int = 224
    num_workers: int = 0
    # Training augmentation: RandomResizedCrop(scale=(min_crop_scale, 1)) and an optional flip.
    min_crop_scale: float = 0.08
    horizontal_flip: bool = True


@dataclass
class TrainerConf:
    # The Designer's defaults. Its docs also show lr 0.1 in one table; 0.001 is the stated default.
    epochs: int = 5
    batch_size: int = 16
    warmup_epochs: int = 0
    learning_rate: float = 0.001
    seed: int = 1
    patience: int = 3
    print_frequency: int = 10
    momentum: float = 0.9
    weight_decay: float = 0.0001
    # Automatic mixed precision (float16) where a GPU is used; channels-last always goes with a GPU.
    amp: bool = True
    # How images reach the device (mltrain.components.image_input): auto | cpu | gpu. cpu: the loader's workers
    # decode (JPEGs at reduced size where the crop allows), crop and batch uint8, normalised on the device; gpu: the
    # workers read bytes, the GPU decodes (nvJPEG) and augments. auto: gpu on a GPU when every image is a JPEG.
    input: str = "auto"
    # Epoch checkpoints kept, newest first (a resume needs only the newest); 0 keeps every one. Each
    # holds the weights and the optimizer state: ResNet-18's are 90 MB, ResNet-50's about 200 MB.
    keep_checkpoints: int = 2
    # Also write outputs/model/model.onnx (dynamic batch), verified against PyTorch with ONNX Runtime
    # (needs `pip install 'mltrain[onnx]'`).
    export_onnx: bool = False
    onnx_opset: int = 18


@dataclass
class ParallelJobConf:
    """Azure ML's parallel job (v2 `type: parallel`, v1 ParallelRunStep): the user's entry script's `init()` once
    per worker process, `run(mini_batch)` per mini-batch of the input, `shutdown()` at the end. One agent per
    node (`distribution.node_count`, Azure's `resources.instance_count`) runs `max_concurrency_per_instance`
    workers, which take mini-batches from a queue in the run's folder (mltrain.parallel.program)."""

    kind: str = "parallel"
    # Azure's task.code and task.entry_script: the entry script, run from a snapshot of the folder.
    source_directory: str = "."
    entry_script: str = MISSING
    # task.program_arguments: the entry script reads them from sys.argv (argparse's parse_known_args).
    program_arguments: List[Any] = field(default_factory=list)
    # A folder of files, a file, a folder with an MLTable file, or a CSV/TSV/Parquet file or folder.
    input_data: str = MISSING
    # auto | files | tabular: `run` gets a list of file paths, or a pandas DataFrame (Azure: uri_folder, mltable).
    input_format: str = "auto"
    # A number of files for file input (Azure's default 10); a size ("1MB", "10kb") for tabular (default 1MB).
    mini_batch_size: Optional[str] = None
    # Tabular input: one mini-batch per value of these columns (Azure's partition_keys), instead of by size.
    partition_keys: List[str] = field(default_factory=list)
    max_concurrency_per_instance: int = 1
    # Failed mini-batches (after their retries) and failed items the job tolerates; -1: any number.
    mini_batch_error_threshold: int = -1
    error_threshold: int = -1
    # Of all items, the share (percent) allowed to fail; null: not checked (Azure's --allowed_failed_percent).
    allowed_failed_percent: Optional[float] = None
    # retry_settings: a failed or timed-out mini-batch runs again up to max_retries times; timeout in seconds.
    max_retries: int = 3
    timeout: float = 60.0
    # append_row | summary_only: rows run() returns go to one file, in input order.
    output_action: str = "append_row"
    # The file or folder the rows go to (a folder: parallel_run_step.txt in it); null: the run's outputs/.
    append_row_to: Optional[str] = None
    append_row_file_name: str = "parallel_run_step.txt"
    logging_level: str = "INFO"
    # Folders made before the workers start (a v2 job's outputs, which program_arguments may name).
    output_dirs: List[str] = field(default_factory=list)
    params: Dict[str, Any] = field(default_factory=dict)
