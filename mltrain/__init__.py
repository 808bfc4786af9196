"""mltrain: Azure ML's PyTorch training, local-first and Slurm-native, on Hydra and submitit.

`mltrain.submit(...)` and `mltrain.Run` are the Python API; `mltrain.run` is the metrics API for
scripts; `MltrainError`, `RunFailed` and `RunCanceled` are what the API raises. They are imported
on first use, so `import mltrain` stays cheap.

The packages, in the order data flows through them:
  config/        schemas, composition, search path, validation, Azure ML v1 aliases
  environments/  curated and custom environments, built or checked
  launch/        the frozen job, freezing, rank programs, snapshot, dry run, orchestration, the Hydra adapter
  runs/          statuses, the run record, its end, metrics, console, the run handle
  ranks/         the rank contract, the process runner, per-rank reports, a Hydra app's rank side
  backends/      the Backend protocol and its table; local, mpi, slurm (each: driver and rank side)
  cli/           `mltrain`, `mltrain runs`, `mltrain env`
  components/    the Designer's built-in components, run inside the ranks
"""
import importlib

__version__ = "0.2.0"

_LAZY = {"submit": "mltrain.api", "Run": "mltrain.handle", "Model": "mltrain.models.registry", "MltrainError": "mltrain.errors",
         "RunFailed": "mltrain.errors", "RunCanceled": "mltrain.errors", "ConfigError": "mltrain.errors"}


def __getattr__(name):
    if name == "run":  # `from mltrain import run`: the metrics API for scripts
        return importlib.import_module("mltrain.script_metrics")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'mltrain' has no attribute {name!r}")
