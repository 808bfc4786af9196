"""azureml.core.webservice: v1 services (ACI, AKS, local), each served on this machine by mltrain's endpoint
engine: a v1 service NAME is the endpoint NAME (`mltrain endpoints show NAME`) with one deployment."""
from azureml.core._refused import module_getattr
from azureml.core.webservice.aci import AciServiceDeploymentConfiguration, AciWebservice
from azureml.core.webservice.aks import AksServiceDeploymentConfiguration, AksWebservice
from azureml.core.webservice.local import LocalWebservice, LocalWebserviceDeploymentConfiguration
from azureml.core.webservice.webservice import Webservice, WebserviceDeploymentConfiguration

__getattr__ = module_getattr("azureml.core.webservice", {
    "AksEndpoint": "an AKS endpoint's versions and traffic are an online endpoint's deployments here: "
                   "`mltrain endpoints deploy` and `mltrain endpoints traffic`",
})

__all__ = ["AciServiceDeploymentConfiguration", "AciWebservice", "AksServiceDeploymentConfiguration", "AksWebservice",
           "LocalWebservice", "LocalWebserviceDeploymentConfiguration", "Webservice",
           "WebserviceDeploymentConfiguration"]
