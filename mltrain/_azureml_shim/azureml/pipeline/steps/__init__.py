"""azureml.pipeline.steps: PythonScriptStep, MpiStep (seed 000, every parameter), CommandStep; each an
mltrain pipeline step (mltrain.spec.schema.StepConf) with its reuse (allow_reuse, version, hash_paths)."""
from azureml.pipeline.steps.base import CommandStep, HyperDriveStep, MpiStep, PythonScriptStep

__all__ = ["CommandStep", "HyperDriveStep", "MpiStep", "PythonScriptStep"]
