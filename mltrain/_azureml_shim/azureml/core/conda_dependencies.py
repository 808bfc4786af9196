"""azureml.core.conda_dependencies: where v1 code imports CondaDependencies from."""
from azureml.core.environment import CondaDependencies

__all__ = ["CondaDependencies"]
