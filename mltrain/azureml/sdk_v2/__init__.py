"""Azure ML's v2 Python SDK (azure-ai-ml) on mltrain: a notebook that builds jobs with `command(...)`,
`.sweep(...)` or `@dsl.pipeline` and submits them with `MLClient(...).jobs.create_or_update(job)` runs
here unmodified when mltrain is selected from outside it:

    MLTRAIN_AZUREML=1 python train_notebook_as_script.py
    MLTRAIN_AZUREML=1 jupyter lab                        # every kernel started from it
    python -m mltrain.azureml.sdk_v2.run_notebook notebook.ipynb      # the notebook's code cells, in order

With the variable set, `from azure.ai.ml import MLClient` gives mltrain's client (sdk_v2.client); the job
entities stay azure-ai-ml's own. Without it nothing here is imported and azure-ai-ml talks to Azure.
The SDK is the optional extra `mltrain[azure]`; this package imports it only when a client is used.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

#: The variable that selects mltrain for azure-ai-ml (read by the `.pth` line the wheel installs).
SELECT_ENV = "MLTRAIN_AZUREML"
INSTALL = "azure-ai-ml is not installed: pip install 'mltrain[azure]' (azure-ai-ml and azure-identity)"


def require_azure() -> Any:
    """azure-ai-ml's types mltrain's client hands back, or one MltrainError line saying what to install."""
    try:
        from azure.ai.ml import load_component, load_job  # optional
        from azure.ai.ml.entities import AmlCompute, CommandJob  # optional
        from azure.ai.ml.exceptions import (  # optional
            ErrorCategory,
            ErrorTarget,
            JobException,
            MlException,
            ValidationException,
        )
        from azure.core.exceptions import ResourceNotFoundError  # optional
    except ImportError:
        from mltrain.base.errors import MltrainError  # startup

        raise MltrainError(INSTALL) from None
    return SimpleNamespace(load_job=load_job, load_component=load_component, AmlCompute=AmlCompute, CommandJob=CommandJob,
                           ErrorCategory=ErrorCategory, ErrorTarget=ErrorTarget, JobException=JobException,
                           MlException=MlException, ValidationException=ValidationException,
                           ResourceNotFoundError=ResourceNotFoundError)
