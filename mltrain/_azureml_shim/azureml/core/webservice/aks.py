"""`AksWebservice`: an Azure Kubernetes Service service, served on this machine. `auth_enabled` (default True),
`token_auth_enabled`, the keys, `num_replicas` (the server's worker processes, default 1) and
`scoring_timeout_ms` apply; autoscale, CPU/GPU/memory requests and limits, probes, namespace and the other
cluster settings are kept in the service's record."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Dict, Optional, Tuple

from azureml.core.webservice.webservice import Webservice, WebserviceDeploymentConfiguration, token_for


class AksServiceDeploymentConfiguration(WebserviceDeploymentConfiguration):
    _type, _kind = "AKS", "aks"
    _fields = ("autoscale_enabled", "autoscale_min_replicas", "autoscale_max_replicas", "autoscale_refresh_seconds",
               "autoscale_target_utilization", "collect_model_data", "auth_enabled", "cpu_cores", "memory_gb",
               "enable_app_insights", "scoring_timeout_ms", "replica_max_concurrent_requests", "max_request_wait_time",
               "num_replicas", "primary_key", "secondary_key", "tags", "properties", "description", "gpu_cores",
               "period_seconds", "initial_delay_seconds", "timeout_seconds", "success_threshold", "failure_threshold",
               "namespace", "token_auth_enabled", "compute_target_name", "cpu_cores_limit", "memory_gb_limit",
               "blobfuse_enabled")
    _defaults = {"cpu_cores": 0.1, "memory_gb": 0.5, "auth_enabled": True, "token_auth_enabled": False,
                 "scoring_timeout_ms": 60000, "replica_max_concurrent_requests": 1}
    _applied = WebserviceDeploymentConfiguration._applied + ("token_auth_enabled", "num_replicas", "scoring_timeout_ms")
    _redeploying = ("num_replicas", "scoring_timeout_ms", "replica_max_concurrent_requests")


class AksWebservice(Webservice):
    _webservice_type = "AKS"
    _config_class = AksServiceDeploymentConfiguration

    @staticmethod
    def deploy_configuration(autoscale_enabled: Optional[bool] = None, autoscale_min_replicas: Optional[int] = None,
                             autoscale_max_replicas: Optional[int] = None,
                             autoscale_refresh_seconds: Optional[int] = None,
                             autoscale_target_utilization: Optional[int] = None,
                             collect_model_data: Optional[bool] = None, auth_enabled: Optional[bool] = None,
                             cpu_cores: Optional[float] = None, memory_gb: Optional[float] = None,
                             enable_app_insights: Optional[bool] = None, scoring_timeout_ms: Optional[int] = None,
                             replica_max_concurrent_requests: Optional[int] = None,
                             max_request_wait_time: Optional[int] = None, num_replicas: Optional[int] = None,
                             primary_key: Optional[str] = None, secondary_key: Optional[str] = None,
                             tags: Optional[Dict[str, str]] = None, properties: Optional[Dict[str, str]] = None,
                             description: Optional[str] = None, gpu_cores: Optional[int] = None,
                             period_seconds: Optional[int] = None, initial_delay_seconds: Optional[int] = None,
                             timeout_seconds: Optional[int] = None, success_threshold: Optional[int] = None,
                             failure_threshold: Optional[int] = None, namespace: Optional[str] = None,
                             token_auth_enabled: Optional[bool] = None, compute_target_name: Optional[str] = None,
                             cpu_cores_limit: Optional[float] = None, memory_gb_limit: Optional[float] = None,
                             blobfuse_enabled: Optional[bool] = None) -> AksServiceDeploymentConfiguration:
        given: Dict[str, Any] = dict(locals())
        return AksServiceDeploymentConfiguration(**given)

    def get_token(self) -> Tuple[str, datetime]:
        """(token, refresh_by): the service's key is its token here."""
        return token_for(self)
