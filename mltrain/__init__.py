"""mltrain: Azure ML's PyTorch training, local-first and Slurm-native, on Hydra and submitit.

`mltrain.submit(...)` and `mltrain.Run` are the Python API; `mltrain.run` is the metrics API for
scripts; `MltrainError`, `RunFailed` and `RunCanceled` are what the API raises. They are imported
on first use, so `import mltrain` stays cheap.

The packages, bottom layer first (tests/unit/test_import_graph.py holds the layers and this map):
  base/          errors, MLTRAIN_HOME, atomic files, digests, processes and signals (standard library only)
  jobspec/       the job spec, the frozen job, statuses, job kinds, record layouts, the compute kinds' schemas
  config/        schemas, composition, search path, validation, Azure ML v1 aliases
  environments/  curated and custom environments, built or checked
  runs/          the run record, its end, metrics, logs, console, waiting
  ranks/         the rank contract, the process runner, per-rank reports, a Hydra app's rank side
  components/    the Designer's built-in components, run inside the ranks
  parallel/      the parallel job's engine (mini-batches, their queue, agents and workers), inside the ranks
  backends/      the Backend protocol and its table; local, mpi, slurm (each: driver and rank side)
  launch/        freezing, rank programs, snapshots, the dry run, orchestration, the Hydra adapter
  sweeps/        HyperDrive sweeps: the search space, Optuna's sampling, early termination, resume
  pipelines/     pipelines of steps: their graph, reuse, step runs, resume
  models/        the model registry on MLflow's and its store
  tracking/      runs mirrored into MLflow's store
  endpoints/     online endpoints under Azure's inference server
  azureml/       Azure ML's v2 job files and the front ends of its SDKs (sdk_v2/ at the top)
  command/       a command, composed once, to its engine (run, sweep, pipeline)
  cli/           `mltrain` and its subcommands (runs, env, job, endpoints, models, ...)
  python_api/    `mltrain.submit`, the run handle `mltrain.Run`, run history (plot, compare, rerun)
In the installed package, conf/ holds the YAML presets (the repository's conf/, one folder per config group).
Loose modules: only hydra_task and slurm_rank, the stubs users' files and pickles name. Not imported by
mltrain: _azureml_shim/ (the v1 SDK's stand-in, `azureml.*`) and _rank_site/ (the script ranks' exit hook).
"""
import importlib

__version__ = "0.2.0"

_LAZY = {"submit": "mltrain.python_api.api", "Run": "mltrain.python_api.handle", "Model": "mltrain.models.registry",
         "MltrainError": "mltrain.base.errors",
         "RunFailed": "mltrain.base.errors", "RunCanceled": "mltrain.base.errors", "ConfigError": "mltrain.base.errors"}


def __getattr__(name):
    if name == "run":  # `from mltrain import run`: the metrics API for scripts
        return importlib.import_module("mltrain.runs.script_metrics")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mltrain' has no attribute {name!r}")
