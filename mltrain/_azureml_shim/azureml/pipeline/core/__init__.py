"""azureml.pipeline.core: v1 pipelines on mltrain's pipeline engine (mltrain.pipelines): each step an
ordinary run, outputs passed as folders, reuse with its reasons, the graph on this machine or queued on
Slurm as one dependency chain."""
from azureml.pipeline.core.graph import PipelineData, PipelineParameter, StepSequence
from azureml.pipeline.core.pipeline import Pipeline, PipelineRun, StepRun

__all__ = ["Pipeline", "PipelineData", "PipelineParameter", "PipelineRun", "StepRun", "StepSequence"]
