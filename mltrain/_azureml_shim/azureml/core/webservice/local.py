"""`LocalWebservice`: Azure's local Docker service, here a server process on this machine (no Docker): the
same as an ACI or AKS service, without auth, on the port given (default: a free one, kept for its life)."""
from __future__ import annotations

from typing import Any, Dict, Optional

from azureml.core.webservice import _engine
from azureml.core.webservice.webservice import Webservice, WebserviceDeploymentConfiguration


class LocalWebserviceDeploymentConfiguration(WebserviceDeploymentConfiguration):
    _type, _kind = "Local", "local"
    _fields = ("port",)
    _applied = ("port",)


class LocalWebservice(Webservice):
    _webservice_type = "Local"
    _config_class = LocalWebserviceDeploymentConfiguration

    @staticmethod
    def deploy_configuration(port: Optional[int] = None) -> LocalWebserviceDeploymentConfiguration:
        given: Dict[str, Any] = {"port": port}
        return LocalWebserviceDeploymentConfiguration(**given)

    @property
    def port(self) -> int:
        return int(self._port)

    def reload(self, wait: bool = False) -> None:
        """Start the scoring script again (after you changed it), as Azure's reload does in its container."""
        models, inference = _engine.current_inputs(self.name)
        settings = self._config_class(**self._config_class._from_record(_engine.describe(self.name)))._settings()
        _engine.deploy(self.name, models, inference, {**settings, "image_settings": {}}, show_output=False, update=True)
