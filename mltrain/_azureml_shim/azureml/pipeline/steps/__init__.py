"""azureml.pipeline.steps: PythonScriptStep, MpiStep (seed 000, every parameter), CommandStep, HyperDriveStep; each an
mltrain pipeline step (mltrain.jobspec.schema.StepConf) with its reuse (allow_reuse, version, hash_paths)."""
from azureml.pipeline.steps.base import CommandStep, MpiStep, PythonScriptStep
from azureml.pipeline.steps.hyperdrive_step import HyperDriveStep, HyperDriveStepRun
from azureml.pipeline.steps.parallel_run_step import ParallelRunConfig, ParallelRunStep

__all__ = ["CommandStep", "HyperDriveStep", "HyperDriveStepRun", "MpiStep", "ParallelRunConfig", "ParallelRunStep", "PythonScriptStep"]


from azureml.core._refused import module_getattr  # noqa: E402

__getattr__ = module_getattr("azureml.pipeline.steps", {
    "AutoMLStep": "AutoML is Azure's service; train the model with a script step",
    **{name: "a PythonScriptStep or CommandStep on a local or Slurm compute" for name in (
        "DatabricksStep", "DataTransferStep", "AdlaStep", "AzureBatchStep", "ModuleStep", "NotebookRunnerStep",
        "SynapseSparkStep", "KustoStep", "RScriptStep")},
})
