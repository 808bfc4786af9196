"""azureml.data.file_dataset: where v1 code imports FileDataset from."""
from azureml.core.dataset import FileDataset

__all__ = ["FileDataset"]
