"""azureml.core.authentication: credentials are constructed and never asked for a token (nothing here
talks to Azure)."""
from __future__ import annotations

from typing import Any


class AbstractAuthentication:
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args, self.kwargs = args, kwargs

    def get_authentication_header(self) -> dict:
        return {}


class InteractiveLoginAuthentication(AbstractAuthentication):
    pass


class ServicePrincipalAuthentication(AbstractAuthentication):
    pass


class MsiAuthentication(AbstractAuthentication):
    pass


class AzureCliAuthentication(AbstractAuthentication):
    pass


class TokenAuthentication(AbstractAuthentication):
    pass


__all__ = ["AbstractAuthentication", "AzureCliAuthentication", "InteractiveLoginAuthentication",
           "MsiAuthentication", "ServicePrincipalAuthentication", "TokenAuthentication"]
