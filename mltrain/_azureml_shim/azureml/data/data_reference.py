"""azureml.data.data_reference: where v1 code imports DataReference from."""
from azureml.core.datastore import DataReference

__all__ = ["DataReference"]
