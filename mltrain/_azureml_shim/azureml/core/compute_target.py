"""azureml.core.compute_target: where v1 code imports ComputeTargetException from."""
from azureml.exceptions import ComputeTargetException

__all__ = ["ComputeTargetException"]
