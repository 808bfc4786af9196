"""azureml.data.output_dataset_config: where v1 code imports OutputFileDatasetConfig from."""
from azureml.data import OutputFileDatasetConfig

__all__ = ["OutputFileDatasetConfig"]
