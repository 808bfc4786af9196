"""Typed schemas of every config group, registered in Hydra's ConfigStore.

Every group is typed while composing, so OmegaConf rejects unknown keys and wrong types before anything
runs: `environment` and `distribution` by their field in MltrainConf (their built-in presets name no
schema: loading and merging one more config per group is about 2 ms each of every command), `job` and
`compute`, whose schema depends on the option, by the preset's ``defaults: [<name>_schema]``. A user's
own preset may name its group's schema either way. The sections only some job kinds have (`model`, `data`,
`trainer`: mltrain.jobspec.job_schemas) are no fields here; a kind's preset brings them in (mltrain.jobspec.kinds). Range rules
(epochs > 0, ...) cannot be expressed in a dataclass; they live in mltrain.config.validate.

This module imports nothing but the standard library: the driver registers these classes with Hydra
(mltrain.config.schema_store), and the ranks and backends rebuild the frozen job's typed compute and
distribution settings from them without loading Hydra or OmegaConf.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Type, TypeVar

from mltrain.base.errors import ConfigError

if TYPE_CHECKING:  # typeshed's protocol of a dataclass exists for type checkers only
    from _typeshed import DataclassInstance

#: OmegaConf's marker for a value that must be set (omegaconf.MISSING), spelled out to stay light.
MISSING: Any = "???"

# -------------------------------------------------------------------------------- environment


@dataclass
class PythonSectionConf:
    # True: run in an interpreter the user manages (for `current`, this one).
    user_managed: bool = True
    interpreter: Optional[str] = None


@dataclass
class DockerSectionConf:
    base_image: Optional[str] = None


@dataclass
class EnvironmentConf:
    name: str = "current"
    version: Optional[str] = None
    python: PythonSectionConf = field(default_factory=PythonSectionConf)
    # A conda environment as a mapping, or the path of a conda YAML file.
    conda: Optional[Any] = None
    # A list of requirement strings, or the path of a requirements file.
    pip: Optional[Any] = None
    docker: DockerSectionConf = field(default_factory=DockerSectionConf)
    environment_variables: Dict[str, str] = field(default_factory=dict)
    # Shell lines run before each rank on a cluster.
    setup: List[str] = field(default_factory=list)
    # A user-managed interpreter that does not satisfy the declared packages: error | warn.
    check: str = "error"


# ------------------------------------------------------------------------------------ compute


@dataclass
class ComputeConf:
    """What every compute kind's schema has. Each backend owns its kind's schema, a subclass of this one
    (mltrain.backends.<name>.compute), listed in mltrain.jobspec.computes."""

    kind: str = MISSING

    @classmethod
    def for_controller(cls, node: Any) -> None:
        """Shape a controller step's compute (a pipeline's sweep step: its driver, not its runs) so that it
        holds nothing its runs wait for; `node` is the step's composed `compute` (a DictConfig)."""


# ------------------------------------------------------------------------------- distribution


@dataclass
class DistributionConf:
    # none | pytorch | mpi
    kind: str = "none"
    node_count: int = 1
    process_count_per_node: int = 1
    # nccl | gloo | auto (nccl where GPUs are visible, else gloo)
    backend: str = "auto"
    # torch.distributed collective timeout, exported as MLTRAIN_DIST_TIMEOUT_S.
    timeout_s: int = 1800
    # mpi only: Horovod scripts, extra `mpirun` flags, more ranks than CPUs/GPUs, srun's MPI plugin.
    horovod: bool = False
    mpirun_args: List[str] = field(default_factory=list)
    oversubscribe: bool = False
    slurm_mpi: str = "pmix"
    # Scripts and commands: destroy a torch.distributed process group the program left open when it
    # exits (an exit hook on PYTHONPATH); a group left open can abort the rank in gloo's teardown.
    close_process_group: bool = True
    # Also export TF_CONFIG, TensorFlow's cluster spec, to every rank: one worker per rank, each with a
    # host:port of its own (MultiWorkerMirroredStrategy), as Azure ML's `distribution: {type: tensorflow}`.
    tf_config: bool = False


# ------------------------------------------------------------------------------------- top level


@dataclass
class RunConf:
    # An explicit run id (the Python API sets one); sweep members get `_<index>` appended.
    id: Optional[str] = None
    # Where run directories go; one directory per run and per sweep member, never reused.
    root: str = "${oc.env:MLTRAIN_HOME,'~/.mltrain'}/runs"
    # Which ranks' output reaches the console: rank0 | all | none (every rank always has its log).
    console: str = "rank0"
    # Seconds between SIGTERM and SIGKILL when ranks are stopped.
    kill_grace_s: float = 5.0
    # Return right after submission (compute=slurm); follow with `mltrain runs status|logs|cancel`.
    detach: bool = False
    # Sample the ranks' CPU and memory and their GPUs' use into the run's metrics (system/..., MLflow's names).
    system_metrics: bool = True
    # Seconds between two samples (the first comes after at most 1 s).
    system_metrics_interval_s: float = 10.0
    # Minutes without progress from any rank (output, a metric, a checkpoint, a heartbeat) after which the run is
    # hung: every rank's stack is taken and the run ends Failed naming the rank(s) elsewhere. null: 30 for the
    # built-in components, off for scripts and commands; 0: off.
    hang_timeout_min: Optional[float] = None
    # What a hung run does once its stacks are taken: fail | requeue (a cluster's: the job runs again from its
    # checkpoints, counted in compute.max_requeues).
    hang_action: str = "fail"


@dataclass
class EarlyTerminationConf:
    """Azure ML HyperDrive's early-termination policies (mltrain.sweeps.policies). Each logged value of
    the primary metric is one interval; a policy is applied at every multiple of evaluation_interval
    from delay_evaluation on."""

    # none | bandit | median_stopping | truncation_selection
    policy: str = "none"
    evaluation_interval: int = 1
    delay_evaluation: int = 0
    # bandit: exactly one of the two
    slack_factor: Optional[float] = None
    slack_amount: Optional[float] = None
    # truncation_selection: cancel the lowest X % (1-99) at each evaluation
    truncation_percentage: Optional[int] = None
    exclude_finished_runs: bool = False


@dataclass
class SweepConf:
    """`mltrain -m` as Azure ML HyperDrive. Left at these defaults, `-m a=1,2 b=3,4` is Hydra's own
    grid of every member; setting any key below makes it a sweep that samples, watches a metric and
    may stop members early (mltrain.sweeps)."""

    # grid | random | sobol | bayesian (null: grid when any other key here is set)
    sampling: Optional[str] = None
    # random, sobol and bayesian repeat with the same seed; null draws one (recorded in sweep.json)
    seed: Optional[int] = None
    # a metric the job logs (the trainer's top1_accuracy or val_loss, or mltrain.run.log in a script)
    primary_metric: Optional[str] = None
    # maximize | minimize
    goal: str = "maximize"
    max_total_runs: Optional[int] = None
    # null: as many as the compute allows (compute.max_concurrent_jobs, compute.array_parallelism)
    max_concurrent_runs: Optional[int] = None
    max_duration_minutes: Optional[float] = None
    early_termination: EarlyTerminationConf = field(default_factory=EarlyTerminationConf)
    # The search space in Hydra's sweep grammar, besides the command line's own `-m key=...`:
    # {trainer.learning_rate: "tag(log, interval(1e-4, 0.1))", model: "choice(resnet18, densenet121)"}
    params: Dict[str, str] = field(default_factory=dict)


@dataclass
class StepConf:
    """One step of a pipeline (Azure ML's MpiStep / PythonScriptStep / CommandStep): an ordinary job."""

    # Overrides of any group, as on the command line: [job=script, job.script=train.py, distribution=mpi]
    overrides: List[str] = field(default_factory=list)
    # Config values composed over the groups the overrides choose, as a config file of the step's own would be
    # ({job: {script: train.py, arguments: [--lr, 0.1]}}): typed, no override grammar. The step's overrides and
    # the command line's still win over them.
    values: Dict[str, Any] = field(default_factory=dict)
    # Exported as AML_PARAMETER_<name> (merged into job.params); part of the reuse key.
    params: Dict[str, Any] = field(default_factory=dict)
    # name -> `STEP.outputs.NAME`, a path, or {path: ..., hash: content | mtime | none}
    inputs: Dict[str, Any] = field(default_factory=dict)
    # Named folders the step writes: <its run>/outputs/<name>, `${outputs.<name>}` in its arguments.
    outputs: List[str] = field(default_factory=list)
    # Steps this one waits for without reading their outputs.
    after: List[str] = field(default_factory=list)
    allow_reuse: bool = True
    # Azure's `version`: change it to say the step's behaviour changed (part of the reuse key).
    version: Optional[str] = None
    # Files or folders of the source snapshot the reuse key hashes (MpiStep's hash_paths); empty: all of
    # it. Name them when steps share a source folder, so editing one step's script reruns that step only.
    hash_paths: List[str] = field(default_factory=list)
    # A step whose program only starts and follows other runs (a sweep's controller): on Slurm its own job
    # asks for one CPU, no GPU and at most 2 GB, whatever the compute says; the runs it starts ask for the rest.
    controller: bool = False


@dataclass
class PipelineConf:
    """A graph of steps (mltrain.pipelines), chosen with `pipeline=NAME` (conf/pipeline/NAME.yaml)."""

    steps: Dict[str, StepConf] = field(default_factory=dict)
    # Steps running at the same time on this machine (a Slurm graph is queued whole).
    max_concurrent_steps: int = 4
    # Azure's regenerate_outputs (`--force-rerun`): run every step, reuse nothing.
    force_rerun: bool = False
    # When a step fails, true: the steps that do not depend on it go on to their end (only its
    # dependants are canceled); false: the pipeline stops, every step still running or not started
    # is canceled. Azure's settings.continue_on_step_failure (whose default, for its files, is false).
    continue_on_step_failure: bool = True


@dataclass
class MltrainConf:
    experiment_name: str = "mltrain"
    job: Any = MISSING
    environment: EnvironmentConf = MISSING
    compute: Any = MISSING
    distribution: DistributionConf = MISSING
    run: RunConf = field(default_factory=RunConf)
    sweep: SweepConf = field(default_factory=SweepConf)
    pipeline: Optional[PipelineConf] = None
    # Data paths the job reads and writes, by name: `${inputs.data}` in arguments, and AZUREML_DATAREFERENCE_<name>
    # in every rank (a pipeline fills them in from its steps' inputs and outputs).
    inputs: Dict[str, str] = field(default_factory=dict)
    outputs: Dict[str, str] = field(default_factory=dict)
    # Print what would be started (per rank: command line, working directory, environment); start nothing.
    dry_run: bool = False
    # An Azure ML v2 job file's own record (`mltrain job create --file`): its path, type, name,
    # display_name, description, tags and the Azure-only fields it set, kept with the run, not acted on.
    azureml: Dict[str, Any] = field(default_factory=dict)


_Schema = TypeVar("_Schema", bound="DataclassInstance")
_Compute = TypeVar("_Compute", bound=ComputeConf)


def compute_as(compute: ComputeConf, schema: Type[_Compute]) -> _Compute:
    """`compute` as the schema of the one compute kind a backend runs (mltrain.backends.backend_for
    gives a backend jobs of its own kind only, so any other kind is mltrain's own mistake)."""
    if not isinstance(compute, schema):
        raise TypeError(f"compute settings of kind '{compute.kind}' where {schema.__name__} was expected")
    return compute


def distribution_from_dict(values: Dict[str, Any], key: str = "distribution") -> DistributionConf:
    return build(DistributionConf, values, key)


def build(schema: Type[_Schema], values: Dict[str, Any], key: str) -> _Schema:
    names = [f.name for f in dataclasses.fields(schema)]
    unknown = sorted(k for k in values if k not in names)
    if unknown:

        raise ConfigError(f"{key}.{unknown[0]}", "unknown key", names)
    return schema(**values)
