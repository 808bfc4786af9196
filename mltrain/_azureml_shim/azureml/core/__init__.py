"""mltrain's stand-in for azureml-core (Azure ML SDK v1), found only when the real one is not installed.

Control scripts written for Azure ML (`Workspace.from_config()`, `Experiment(ws, name).submit(ScriptRunConfig(...))`,
`run.wait_for_completion(show_output=True)`, `run.register_model(...)`) run here unmodified, on this
machine or on a Slurm cluster; training scripts get `Run.get_context()`. Nothing heavy is imported until
something is submitted.
"""
from azureml.core.compute import ComputeTarget
from azureml.core.dataset import Dataset
from azureml.core.datastore import Datastore
from azureml.core.environment import Environment
from azureml.core.experiment import Experiment
from azureml.core.model import Model
from azureml.core.run import Run, ScriptRun
from azureml.core.runconfig import RunConfiguration
from azureml.core.script_run_config import ScriptRunConfig
from azureml.core.workspace import Workspace

VERSION = "1.60.0"  # the azureml-core release whose API this stand-in follows (its last, 2025)

__all__ = ["VERSION", "ComputeTarget", "Dataset", "Datastore", "Environment", "Experiment", "Model", "Run",
           "RunConfiguration", "ScriptRun", "ScriptRunConfig", "Workspace"]
