"""Azure ML's curated PyTorch environments, as full specs.

Sources, per entry:
- AzureML-PyTorch-1.0 ... 1.6 (-CPU/-GPU): the package lists of Azure ML's "Curated environments"
  page (azure-docs resource-curated-environments.md, June-Sept 2020: channel conda-forge, python,
  pip azureml-core/-defaults/-telemetry/-restclients-hyperdrive/-train-core, torch, torchvision,
  mkl, horovod, tensorboard, future) and the version pins Azure ML shipped in those environments
  (python 3.6.2 throughout; base images intelmpi2018.3-*-ubuntu16.04 up to 1.4 and
  openmpi3.1.2-*-ubuntu18.04 from 1.5). AzureML-PyTorch-1.6-GPU's pins (torch 1.6.0, horovod 0.19.1,
  python 3.6.2, openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04) are the ones the seed documents use.
- Azure's own list was inconsistent for 1.6: it pinned torchvision 0.5.0 (the torch 1.4 release)
  beside torch 1.6.0; the pin is kept as Azure published it (torchvision 0.7.0 matches torch 1.6).
- AzureML-pytorch-1.7/1.8/1.9-ubuntu18.04-py37-cuda11-gpu and -1.10-...-py38-cuda11-gpu: the
  Dockerfiles Azure ML published for them (FROM mcr.microsoft.com/azureml/openmpi4.1.0-cuda11.x-cudnn8-
  ubuntu18.04, conda python 3.7/3.8 with pytorch/torchvision, pip horovod[pytorch]==0.21.3).
- Azure's curated v2 environments (AzureML-sklearn-1.5, -lightgbm-3.3, -lightgbm-3.2-ubuntu18.04-py37-cpu,
  -tensorflow-2.16-cuda12, -acpt-pytorch-2.8-cuda12.6, -acpt-pytorch-2.2-cuda12.1): Azure/azureml-assets,
  file and commit per entry in mltrain.environments.azure_curated.
"""
from __future__ import annotations

from typing import Dict

from mltrain.environments.azure_curated import AZURE_ENVIRONMENTS, catalog_entry

_AZUREML_PIP = ["azureml-core", "azureml-defaults", "azureml-telemetry", "azureml-restclients-hyperdrive",
                "azureml-train-core"]

# version -> (torch, torchvision, horovod, CPU base image, GPU base image)
_V1 = {
    "1.0": ("1.0", "0.2.1", "0.16.1", "intelmpi2018.3-ubuntu16.04", "intelmpi2018.3-cuda10.0-cudnn7-ubuntu16.04"),
    "1.1": ("1.1", "0.2.1", "0.16.1", "intelmpi2018.3-ubuntu16.04", "intelmpi2018.3-cuda10.0-cudnn7-ubuntu16.04"),
    "1.2": ("1.2", "0.4.0", "0.16.1", "intelmpi2018.3-ubuntu16.04", "intelmpi2018.3-cuda10.0-cudnn7-ubuntu16.04"),
    "1.3": ("1.3", "0.4.1", "0.18.1", "intelmpi2018.3-ubuntu16.04", "intelmpi2018.3-cuda10.0-cudnn7-ubuntu16.04"),
    "1.4": ("1.4", "0.5.0", "0.18.1", "intelmpi2018.3-ubuntu16.04", "intelmpi2018.3-cuda10.1-cudnn7-ubuntu16.04"),
    "1.5": ("1.5", "0.5.0", "0.19.1", "openmpi3.1.2-ubuntu18.04", "openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04"),
    # Azure's pin: torchvision 0.5.0 beside torch 1.6.0 (inconsistent in their own list; kept as published).
    "1.6": ("1.6.0", "0.5.0", "0.19.1", "openmpi3.1.2-ubuntu18.04", "openmpi3.1.2-cuda10.1-cudnn7-ubuntu18.04"),
}

# name -> (python, torch, torchvision, horovod, GPU base image)
_V2 = {
    "AzureML-pytorch-1.7-ubuntu18.04-py37-cuda11-gpu": ("3.7", "1.7.1", "0.8.2", "0.21.3", "openmpi4.1.0-cuda11.0.3-cudnn8-ubuntu18.04"),
    "AzureML-pytorch-1.8-ubuntu18.04-py37-cuda11-gpu": ("3.7", "1.8.1", "0.9.1", "0.21.3", "openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04"),
    "AzureML-pytorch-1.9-ubuntu18.04-py37-cuda11-gpu": ("3.7", "1.9.0", "0.10.0", "0.21.3", "openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04"),
    "AzureML-pytorch-1.10-ubuntu18.04-py38-cuda11-gpu": ("3.8", "1.10.0", "0.11.1", "0.21.3", "openmpi4.1.0-cuda11.1-cudnn8-ubuntu18.04"),
}

#: The newest Python each torch release published wheels for (torch's release notes).
TORCH_MAX_PYTHON = {"1.0": "3.7", "1.1": "3.7", "1.2": "3.7", "1.3": "3.7", "1.4": "3.8", "1.5": "3.8",
                    "1.6": "3.8", "1.7": "3.8", "1.8": "3.9", "1.9": "3.9", "1.10": "3.9"}

MCR = "mcr.microsoft.com/azureml/"


def _v1(version: str, gpu: bool) -> dict:
    torch, vision, horovod, cpu_image, gpu_image = _V1[version]
    return {
        "name": f"AzureML-PyTorch-{version}-{'GPU' if gpu else 'CPU'}",
        "python": {"version": "3.6.2", "user_managed": False},
        "conda": {"channels": ["conda-forge"],
                  "dependencies": ["python=3.6.2", {"pip": [*_AZUREML_PIP, f"torch=={torch}", f"torchvision=={vision}",
                                                             "mkl==2018.0.3", f"horovod=={horovod}", "tensorboard==1.14.0",
                                                             "future==0.17.1"]}]},
        "docker": {"base_image": MCR + (gpu_image if gpu else cpu_image)},
    }


def _v2(name: str) -> dict:
    python, torch, vision, horovod, image = _V2[name]
    return {
        "name": name,
        "python": {"version": python, "user_managed": False},
        "conda": {"channels": ["anaconda", "pytorch", "conda-forge"],
                  "dependencies": [f"python={python}", {"pip": ["azureml-core", "azureml-defaults", "azureml-mlflow",
                                                                 f"torch=={torch}", f"torchvision=={vision}",
                                                                 f"horovod[pytorch]=={horovod}", "tensorboard==2.4.0",
                                                                 "future==0.17.1"]}]},
        "docker": {"base_image": MCR + image},
    }


CURATED: Dict[str, dict] = {}
for _version in _V1:
    for _gpu in (False, True):
        _spec = _v1(_version, _gpu)
        CURATED[_spec["name"]] = _spec
for _name in _V2:
    CURATED[_name] = _v2(_name)
# Azure's curated v2 environments (the `azureml` registry's families, also named `AzureML-<family>`), read
# from Azure/azureml-assets (mltrain.environments.azure_curated: file and commit per entry). Their images are
# Azure ML base images (an OS, MPI and conda) with these packages on top, so the packages are the
# environment: mltrain builds them on the host on every compute, Slurm included, and keeps the image's name
# for reference only (no container runtime needed; the catalog keeps it as azure_image).
for _azure in AZURE_ENVIRONMENTS:
    CURATED[_azure.name] = catalog_entry(_azure)
