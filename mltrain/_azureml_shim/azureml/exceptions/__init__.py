"""Azure ML SDK v1's exception classes (azureml.exceptions), so a control script's `except` clauses work."""
from __future__ import annotations

from typing import Any, Optional


class AzureMLException(Exception):
    """The base of Azure ML's exceptions; `message` is the one line the user reads."""

    def __init__(self, exception_message: str = "", inner_exception: Optional[BaseException] = None,
                 **kwargs: Any) -> None:
        super().__init__(exception_message)
        self.message = exception_message
        self.inner_exception = inner_exception


class UserErrorException(AzureMLException):
    pass


class ComputeTargetException(AzureMLException):
    pass


class ExperimentExecutionException(AzureMLException):
    pass


class ActivityFailedException(AzureMLException):
    pass


class RunConfigurationException(AzureMLException):
    pass


class WebserviceException(AzureMLException):
    pass


class ModelNotFoundException(AzureMLException):
    pass


class ProjectSystemException(AzureMLException):
    pass
