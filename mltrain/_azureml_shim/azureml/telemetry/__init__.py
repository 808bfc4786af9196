"""azureml.telemetry: mltrain collects no telemetry; the call is accepted and does nothing."""
from typing import Any


def set_diagnostics_collection(send_diagnostics: bool = True, verbose: bool = False, reset: bool = False) -> None:
    if verbose:
        print("mltrain collects no diagnostics; nothing is sent anywhere")


def get_diagnostics_collection_info(*args: Any, **kwargs: Any) -> dict:
    return {"diagnostics": False}
