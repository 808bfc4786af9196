"""Azure ML's curated v2 environments as Azure defines them, read from Azure/azureml-assets (not from
memory): each entry names its file and commit, and holds that file's pins as written, Azure's own client
packages by name (their `=={{latest-pypi-version}}` is Azure's build-time placeholder; mltrain provides
them and never installs them: mltrain.environments.spec.AZURE_CLIENT).

Azure's images carry Python 3.10 (3.11 for TensorFlow, 3.7 for the retired lightgbm-3.2); mltrain builds
these environments on the host's Python (3.11), where some pins have no wheel: `moved` holds each such pin
and the nearest release that has one (checked with `pip install --dry-run --only-binary=:all:` on Python
3.11, and each environment's whole set resolved together, 2026-11-27; AzureML-sklearn-1.5 also built and
run); every other pin is Azure's (`pandas~=1.5.3` has wheels and stays). A build says once which pins it
moved.

The conda packages of a conda file (pandas, scipy, numpy from conda-forge) are installed from PyPI under
the same versions (mltrain.environments.conda).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

REPO = "https://github.com/Azure/azureml-assets"
#: The snapshot read (2026-07-23): assets/training/general/environments/NAME/context/.
HEAD = "4b41f8ccbc01cf492767adc586ce1661c54c340a"
#: lightgbm-3.2-ubuntu18.04-py37-cpu's last version (2022-05-25), before Azure retired it.
LIGHTGBM_32 = "19102f08aba24aeebf7a55a80fd47a21ac12cabf"
GENERAL = "assets/training/general/environments"
IMAGES = "mcr.microsoft.com/azureml/curated/"

#: Azure's automl-common-tools block, shared by its scikit-learn, LightGBM and ACPT 2.2 files.
_TOOLS = ["py-spy==0.3.12", "debugpy~=1.6.3", "ipykernel~=6.0", "tensorboard", "psutil~=5.8.0", "matplotlib~=3.5.0",
          "tqdm~=4.66.3", "py-cpuinfo==5.0.0", "torch-tb-profiler~=0.4.0", "starlette>=1.0.1"]
_CLIENTS = ["azureml-core", "azureml-defaults", "azureml-mlflow", "azureml-telemetry"]
_ACPT_CLIENTS = ["azureml-core", "azureml-dataset-runtime", "azureml-defaults", "azure-ml-component", "azureml-mlflow",
                 "azureml-contrib-services", "azureml-inference-server-http",
                 "azure-monitor-opentelemetry-exporter==1.0.0b23"]
#: No wheel on Python 3.11 -> the nearest release series with one.
_NUMPY_122 = {"numpy~=1.22.0": "numpy~=1.23.0"}
_TOOLS_MOVED = {"psutil~=5.8.0": "psutil~=5.9.0", "matplotlib~=3.5.0": "matplotlib~=3.6.0"}


@dataclass(frozen=True)
class AzureEnvironment:
    asset: str                      # Azure's asset name (the registry's `azureml` environment)
    source: str                     # the file the pins come from, at `commit`
    python: str                     # the Python of Azure's image
    conda: List[str]                # the conda file's own packages (python and pip left out)
    pip: List[str]                  # its pip packages, as Azure lists them
    commit: str = HEAD
    moved: Dict[str, str] = field(default_factory=dict)   # Azure's pin -> the one installed on Python 3.11

    @property
    def name(self) -> str:
        return f"AzureML-{self.asset}"

    @property
    def cited(self) -> str:
        return f"{REPO}/blob/{self.commit}/{self.source}"


AZURE_ENVIRONMENTS = [
    AzureEnvironment(
        "sklearn-1.5", f"{GENERAL}/sklearn-1.5/context/conda_dependencies.yaml", "3.10",
        ["pandas~=1.5.3", "scipy~=1.10.0", "numpy~=1.22.0"],
        ["scikit-learn-intelex", *_CLIENTS[:2], "azureml-inference-server-http", *_CLIENTS[2:], "scikit-learn~=1.5.0",
         "joblib~=1.2.0", *_TOOLS, "cryptography==48.0.1", "pyarrow>=23.0.1"],
        # Azure installs scikit-learn-intelex's latest release when it builds the image; 2026.2.0 no longer
        # imports beside scikit-learn 1.5 (it needs 1.6's validate_data): the newest that does.
        moved={**_NUMPY_122, **_TOOLS_MOVED, "scikit-learn-intelex": "scikit-learn-intelex<2026.2"}),
    AzureEnvironment(
        "lightgbm-3.3", f"{GENERAL}/lightgbm-3.3/context/conda_dependencies.yaml", "3.10",
        ["pandas~=1.5.3", "scipy~=1.10.0", "numpy~=1.22.0"],
        [*_CLIENTS, "scikit-learn~=1.5.1", "xgboost~=1.7.6", "lightgbm>=4.6.0", "distributed~=2021.10.0",
         "adlfs~=0.7.0", *_TOOLS, "pyarrow>=23.0.1", "cryptography==48.0.1"],
        moved={**_NUMPY_122, **_TOOLS_MOVED}),
    AzureEnvironment(
        "lightgbm-3.2-ubuntu18.04-py37-cpu",
        "general/src/environments/lightgbm-3.2-ubuntu18.04-py37-cpu/context/conda_dependencies.yaml", "3.7", [],
        ["matplotlib>=3.3,<3.4", "psutil>=5.8,<5.9", "tqdm>=4.59,<4.60", "pandas>=1.1,<1.2", "numpy>=1.10,<1.20",
         "scipy~=1.5.0", "scikit-learn~=0.24.1", "xgboost~=1.4.0", "lightgbm~=3.2.0", "dask~=2021.6.0",
         "distributed~=2021.6.0", "dask-ml~=1.9.0", "adlfs~=0.7.0", "ipykernel~=6.0", *_CLIENTS],
        commit=LIGHTGBM_32,
        moved={"matplotlib>=3.3,<3.4": "matplotlib~=3.6.0", "psutil>=5.8,<5.9": "psutil~=5.9.0",
               "pandas>=1.1,<1.2": "pandas~=1.5.0", "numpy>=1.10,<1.20": "numpy~=1.23.2", "scipy~=1.5.0": "scipy~=1.9.2",
               "scikit-learn~=0.24.1": "scikit-learn~=1.1.3"}),
    AzureEnvironment(
        "tensorflow-2.16-cuda12", f"{GENERAL}/tensorflow-2.16-cuda12/context/conda_dependencies.yaml", "3.11",
        ["pandas=2.2.2", "numpy=1.23.5", "scipy~=1.14.0"],
        ["setuptools>=82.0.1", "wheel==0.46.2", "matplotlib~=3.5.0", "psutil~=5.8.0", "tqdm~=4.66.3", "ipykernel~=6.20.2",
         *_CLIENTS, "tensorboard~=2.16.0", "tensorflow[and-cuda]==2.16.2", "tensorflow-datasets~=4.9.0",
         "keras>=3.13.2", "tf-keras==2.16.0", "debugpy~=1.6.3", "idna>=3.15", "flask-cors==6.0.0", "pillow>=12.2.0"],
        moved=dict(_TOOLS_MOVED)),
    # mldesigner's own environments (assets/pipelines/environments): what a component made with mldesigner's
    # @command_component runs in unless it names another (`mldesigner execute` runs the function there). Azure
    # installs the newest mldesigner (a pre-release) when it builds the image: so does mltrain.
    AzureEnvironment(
        "mldesigner-minimal", "assets/pipelines/environments/mldesigner-minimal/context/conda_dependencies.yaml",
        "3.10", [], ["mldesigner"]),
    AzureEnvironment(
        "mldesigner", "assets/pipelines/environments/mldesigner/context/conda_dependencies.yaml", "3.10", [],
        ["azure-ai-ml", "azureml-mlflow", "mldesigner"]),
    # The ACPT images: Azure's requirements.txt on its ptca image, whose Dockerfile upgrades torch, torchvision
    # (and torchaudio) to 2.10.0 / 0.25.0 (+cu126, from download.pytorch.org; PyPI's build here) for both
    # names. DeepSpeed and ONNX Runtime training, also in the image, need a CUDA toolkit to build: the image
    # has them (compute=slurm with a container runtime); a built environment has what is listed here.
    AzureEnvironment(
        "acpt-pytorch-2.8-cuda12.6", f"{GENERAL}/acpt-pytorch-2.8-cuda12.6/context/requirements.txt", "3.10", [],
        [*_ACPT_CLIENTS, "inference-schema", "MarkupSafe", "regex", "pybind11", "transformers", "py-spy", "debugpy",
         "ipykernel", "tensorboard", "psutil", "matplotlib", "tqdm", "py-cpuinfo", "torch-tb-profiler",
         "pydantic-settings>=2.14.2", "msgpack>=1.2.1", "starlette>=1.0.1", "aiohttp>=3.14.0", "python-dotenv>=1.2.2",
         "GitPython>=3.1.47", "torch==2.10.0", "torchvision==0.25.0"]),
    AzureEnvironment(
        "acpt-pytorch-2.2-cuda12.1", f"{GENERAL}/acpt-pytorch-2.2-cuda12.1/context/requirements.txt", "3.10", [],
        [*_ACPT_CLIENTS, "azure-ml", "inference-schema", "MarkupSafe==2.1.2", "regex", "pybind11", "pillow>=12.2.0",
         "transformers>=5.0.0", "aiohttp>=3.14.0", "onnx>=1.21.0", "pytest>=9.0.3", *_TOOLS, "filelock>=3.20.1",
         "jaraco.context>=6.1.0", "protobuf>=6.33.5", "torch==2.10.0", "torchvision==0.25.0"],
        moved=dict(_TOOLS_MOVED)),
]


def catalog_entry(env: AzureEnvironment) -> Dict[str, Any]:
    """The catalog's spec: Azure's conda file with the moved pins in place (built on the host's Python)."""
    conda: List[object] = [env.moved.get(p, p) for p in env.conda]
    conda.append({"pip": [env.moved.get(p, p) for p in env.pip]})
    return {"name": env.name, "python": {"user_managed": False}, "conda": {"channels": ["conda-forge"],
                                                                          "dependencies": conda},
            "azure_image": IMAGES + env.asset, "azure_python": env.python, "source": env.cited,
            "moved": dict(env.moved)}
