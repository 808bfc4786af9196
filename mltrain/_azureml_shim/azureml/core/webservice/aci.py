"""`AciWebservice`: an Azure Container Instances service, served on this machine. `auth_enabled` (default False)
and the keys apply; CPU cores and memory (Azure's defaults 0.1 and 0.5 GB) are kept in the service's record,
with location, SSL, DNS, App Insights, data collection, encryption and network settings."""
from __future__ import annotations

from typing import Any, Dict, Optional

from azureml.core.webservice.webservice import Webservice, WebserviceDeploymentConfiguration


class AciServiceDeploymentConfiguration(WebserviceDeploymentConfiguration):
    _type, _kind = "ACI", "aci"
    _fields = ("cpu_cores", "memory_gb", "tags", "properties", "description", "location", "auth_enabled",
               "ssl_enabled", "enable_app_insights", "ssl_cert_pem_file", "ssl_key_pem_file", "ssl_cname",
               "dns_name_label", "primary_key", "secondary_key", "collect_model_data", "cmk_vault_base_url",
               "cmk_key_name", "cmk_key_version", "vnet_name", "subnet_name")
    _defaults = {"cpu_cores": 0.1, "memory_gb": 0.5, "auth_enabled": False}


class AciWebservice(Webservice):
    _webservice_type = "ACI"
    _config_class = AciServiceDeploymentConfiguration

    @staticmethod
    def deploy_configuration(cpu_cores: Optional[float] = None, memory_gb: Optional[float] = None,
                             tags: Optional[Dict[str, str]] = None, properties: Optional[Dict[str, str]] = None,
                             description: Optional[str] = None, location: Optional[str] = None,
                             auth_enabled: Optional[bool] = None, ssl_enabled: Optional[bool] = None,
                             enable_app_insights: Optional[bool] = None, ssl_cert_pem_file: Optional[str] = None,
                             ssl_key_pem_file: Optional[str] = None, ssl_cname: Optional[str] = None,
                             dns_name_label: Optional[str] = None, primary_key: Optional[str] = None,
                             secondary_key: Optional[str] = None, collect_model_data: Optional[bool] = None,
                             cmk_vault_base_url: Optional[str] = None, cmk_key_name: Optional[str] = None,
                             cmk_key_version: Optional[str] = None, vnet_name: Optional[str] = None,
                             subnet_name: Optional[str] = None) -> AciServiceDeploymentConfiguration:
        given: Dict[str, Any] = dict(locals())
        return AciServiceDeploymentConfiguration(**given)
