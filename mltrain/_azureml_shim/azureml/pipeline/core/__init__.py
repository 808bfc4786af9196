"""azureml.pipeline.core: v1 pipelines on mltrain's pipeline engine (mltrain.pipelines): each step an
ordinary run, outputs passed as folders, reuse with its reasons, the graph on this machine or queued on
Slurm as one dependency chain. Published pipelines, endpoints and drafts are kept in mltrain's home and
submitted again by name, id or a POST to their endpoint (published_pipeline.py, pipeline_endpoint.py,
pipeline_draft.py: Azure's module names)."""
from azureml.pipeline.core.graph import PipelineData, PipelineParameter, StepSequence
from azureml.pipeline.core.pipeline import Pipeline, PipelineRun, StepRun
from azureml.pipeline.core.pipeline_draft import PipelineDraft
from azureml.pipeline.core.pipeline_endpoint import PipelineEndpoint, PipelineIdVersion
from azureml.pipeline.core.published_pipeline import PublishedPipeline

__all__ = ["Pipeline", "PipelineData", "PipelineDraft", "PipelineEndpoint", "PipelineIdVersion", "PipelineParameter",
           "PipelineRun", "PublishedPipeline", "StepRun", "StepSequence", "TrainingOutput"]


from azureml.core._refused import SCHEDULE, module_getattr  # noqa: E402
from azureml.pipeline.core.graph import TrainingOutput  # noqa: E402

__getattr__ = module_getattr("azureml.pipeline.core", {
    **{name: SCHEDULE for name in ("Schedule", "ScheduleRecurrence", "TimeZone")},
    **{name: "write the step as a PythonScriptStep or CommandStep" for name in (
        "InputPortDef", "OutputPortDef", "Module", "ModuleVersion", "ModuleVersionDescriptor")},
})
