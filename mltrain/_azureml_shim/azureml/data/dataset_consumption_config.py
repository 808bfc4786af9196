"""azureml.data.dataset_consumption_config: where v1 code imports DatasetConsumptionConfig from."""
from azureml.core.dataset import DatasetConsumptionConfig

__all__ = ["DatasetConsumptionConfig"]
