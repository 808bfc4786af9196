"""azureml.core.webservice: deployment targets, which have no local service in mltrain: each is one line."""
from typing import Any

from azureml.core.model import DEPLOY_INSTEAD


class _Refused:
    _what = "Webservice"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from azureml.core._bridge import unsupported

        unsupported(self._what, DEPLOY_INSTEAD)

    @classmethod
    def deploy_configuration(cls, *args: Any, **kwargs: Any) -> Any:
        from azureml.core._bridge import unsupported

        unsupported(f"{cls._what}.deploy_configuration", DEPLOY_INSTEAD)


class Webservice(_Refused):
    _what = "Webservice"


class AciWebservice(_Refused):
    _what = "AciWebservice"


class AksWebservice(_Refused):
    _what = "AksWebservice"


class LocalWebservice(_Refused):
    _what = "LocalWebservice"


__all__ = ["AciWebservice", "AksWebservice", "LocalWebservice", "Webservice"]
