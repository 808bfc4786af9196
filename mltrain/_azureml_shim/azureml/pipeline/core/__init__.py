"""azureml.pipeline.core: v1 pipelines on mltrain's pipeline engine (mltrain.pipelines): each step an
ordinary run, outputs passed as folders, reuse with its reasons, the graph on this machine or queued on
Slurm as one dependency chain."""
from azureml.pipeline.core.graph import PipelineData, PipelineParameter, StepSequence
from azureml.pipeline.core.pipeline import Pipeline, PipelineRun, StepRun

__all__ = ["Pipeline", "PipelineData", "PipelineParameter", "PipelineRun", "StepRun", "StepSequence", "TrainingOutput"]


from azureml.core._refused import PUBLISH, module_getattr  # noqa: E402
from azureml.pipeline.core.graph import TrainingOutput  # noqa: E402

__getattr__ = module_getattr("azureml.pipeline.core", {
    **{name: PUBLISH for name in ("PublishedPipeline", "PipelineEndpoint", "Schedule", "ScheduleRecurrence",
                                  "PipelineDraft", "TimeZone")},
    **{name: "write the step as a PythonScriptStep or CommandStep" for name in (
        "InputPortDef", "OutputPortDef", "Module", "ModuleVersion", "ModuleVersionDescriptor")},
})
