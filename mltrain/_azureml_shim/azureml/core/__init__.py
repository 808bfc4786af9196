"""A small stand-in for azureml-core's Run, put on the path of mltrain jobs only when the real
azureml-core is not installed, so that scripts written for Azure ML run unmodified."""
from azureml.core.run import Run

__all__ = ["Run"]
