"""One environment spec (Azure ML's Environment): Python, conda and pip packages, a docker base
image, environment variables and setup lines; built from the `environment` config, from a conda YAML
or a requirements file, cloned, saved to a directory and loaded back.
"""
from __future__ import annotations

import copy
import difflib
import hashlib
import json
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from mltrain.base.atomic import atomic_write
from mltrain.base.errors import ConfigError, MltrainError
from mltrain.environments import conda as conda_map
from mltrain.environments import nearest_pins
from mltrain.environments.catalog import CURATED

RESERVED_PREFIX = "AzureML"
#: Azure ML's own client packages: mltrain's azureml.core stand-in, MLflow tracking and built-in
#: components stand in for them, so a built environment never installs them. `azureml-sdk` (the v1 SDK's
#: umbrella: core, pipeline, train) too: installed, its azureml.core would shadow the stand-in in the ranks,
#: and `Run.get_context()` would be the real SDK's offline run (no experiment, no logged metrics).
AZURE_CLIENT = re.compile(r"^(azureml-(sdk|core|mlflow|defaults|telemetry|train|train-core|train-[a-z-]+|pipeline|"
                          r"pipeline-[a-z-]+|widgets|restclients-hyperdrive|dataprep|"
                          r"dataset-runtime|inference-server-http|designer-[a-z-]+|contrib-[a-z-]+)|azure-ai-ml|"
                          r"azure-ml-component|azure-ml|azure-monitor-opentelemetry-exporter)"
                          r"(?![A-Za-z0-9_.-]*[A-Za-z0-9])", re.I)
#: What a conda environment has that a venv does not: conda's pip depends on setuptools, so every environment
#: Azure builds from a conda file has one, with pkg_resources, which older packages still import (mldesigner
#: 0.1.0b17 in Azure's notebook 1b). This interpreter's own setuptools (seen through the parent .pth) may be
#: one without it (81 and later); a conda file that names setuptools keeps its own.
CONDA_SETUPTOOLS = "setuptools<81"
SPEC_FILE = "azureml_environment.json"
CONDA_FILE = "conda_dependencies.yml"


@dataclass
class EnvironmentSpec:
    name: str
    version: Optional[str] = None
    python_version: Optional[str] = None
    user_managed: bool = True
    interpreter: Optional[str] = None
    conda: Optional[Dict[str, Any]] = None
    pip: List[str] = field(default_factory=list)
    base_image: Optional[str] = None
    environment_variables: Dict[str, str] = field(default_factory=dict)
    setup: List[str] = field(default_factory=list)

    @property
    def curated(self) -> bool:
        return self.name in CURATED

    def python_packages(self) -> List[str]:
        """Every pip requirement: the conda spec's pip section, then the pip list."""
        out: List[str] = []
        for dep in (self.conda or {}).get("dependencies", []):
            if isinstance(dep, dict):
                out += [str(p) for p in dep.get("pip", [])]
        return out + [p for p in self.pip if p not in out]

    def installable_packages(self) -> List[str]:
        """The pip requirements a built environment installs: the conda spec's own packages as PyPI's, then
        the pip packages, all but Azure's client packages."""
        wanted = [pip for _, pip in self.conda_from_pypi()] + self.python_packages()
        out = [p for p in wanted if not AZURE_CLIENT.match(p.strip())]
        if self.conda and not any(_requirement_name(p) == "setuptools" for p in out):
            out.append(CONDA_SETUPTOOLS)
        return out

    def conda_packages(self) -> List[str]:
        """The conda spec's own packages (not python, pip or its pip section)."""
        deps = (self.conda or {}).get("dependencies", [])
        # a conda match spec: the name, then an optional version constraint ("numpy>=1.20", "python=3.8")
        return [str(d) for d in deps
                if isinstance(d, str) and re.split(r"[=<>!~\s]", d.split("::")[-1], maxsplit=1)[0] not in ("python", "pip")]

    def conda_from_pypi(self) -> List[Tuple[str, str]]:
        """[(conda package, the PyPI requirement a built environment installs for it)]."""
        return conda_map.split(self.conda_packages())[0]

    def conda_only_packages(self) -> List[str]:
        """The conda packages PyPI has no equivalent of: a built environment cannot have them."""
        return conda_map.split(self.conda_packages())[1]

    def cache_key(self) -> str:
        """Environments with the same content share one built virtual environment."""
        content: Dict[str, Any] = {"python": self.python_version or "", "packages": sorted(self.python_packages())}
        from_conda = sorted(pip for _, pip in self.conda_from_pypi())
        if from_conda:  # (left out when empty: the keys of environments built before stay theirs)
            content["conda"] = from_conda
        installs = self.installable_packages()
        if CONDA_SETUPTOOLS in installs:  # built before it was added: built again, once
            content["setuptools"] = CONDA_SETUPTOOLS
        if installs:  # built before parent packages its pins break were given releases that fit, and before a
            content["build"] = 2  # conda file's environment chose the standard library's distutils: built again
        bounded = nearest_pins.bounds(installs)
        if bounded:  # likewise: one built with the unbounded newest release is not reused
            content["bounded"] = sorted(bounded.values())
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ derived specs
    def clone(self, new_name: str) -> EnvironmentSpec:
        check_name(new_name)
        other = copy.deepcopy(self)
        other.name = new_name
        return other

    def to_json(self) -> Dict[str, Any]:
        return asdict(self)

    def save(self, directory: str | Path, overwrite: bool = False) -> Path:
        """Azure's save_to_directory: the spec as JSON and its conda dependencies as YAML. A spec
        already saved there is kept unless overwrite is asked for (Azure's default, too)."""
        folder = Path(directory)
        if not overwrite and (folder / SPEC_FILE).exists():
            raise MltrainError(f"{folder / SPEC_FILE} already exists; nothing was written (pass --overwrite to replace it)")
        if folder.exists() and not folder.is_dir():
            raise MltrainError(f"{folder} is a file, not a folder; nothing was written (name a folder: the spec is "
                               f"saved in it as {SPEC_FILE})")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # a file where a parent folder should be, a read-only place
            raise MltrainError(f"cannot create {folder} ({exc.filename}: {exc.strerror}); nothing was written") from None
        atomic_write(folder / SPEC_FILE, json.dumps(self.to_json(), indent=2, sort_keys=True))
        if self.conda:
            atomic_write(folder / CONDA_FILE, yaml.safe_dump(self.conda, sort_keys=False))
        return folder

    @classmethod
    def load(cls, directory: str | Path) -> EnvironmentSpec:
        path = Path(directory) / SPEC_FILE
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError("environment", f"no environment saved at {directory}: {exc}") from None
        return cls(**data)


def check_name(name: str) -> None:
    if name.startswith(RESERVED_PREFIX) and name not in CURATED:
        # every curated name shares the prefix, so only a near spelling of what follows it counts as close
        # ('AzureML-mine' is no misspelling of AzureML-mldesigner, though the whole names are 75 % alike)
        suffixes = {c[len(RESERVED_PREFIX):]: c for c in CURATED if c.startswith(RESERVED_PREFIX)}
        close = [suffixes[s] for s in difflib.get_close_matches(name[len(RESERVED_PREFIX):], list(suffixes), n=3,
                                                                cutoff=0.75)]
        if close:
            raise ConfigError("environment.name", f"'{name}' is not a curated environment; closest: {', '.join(close)}")
        raise ConfigError("environment.name", f"the '{RESERVED_PREFIX}' prefix is reserved for curated environments; "
                          f"give '{name}' another name")


def _read_conda(value: Any) -> Optional[Dict[str, Any]]:
    if value is None:
        return None
    if isinstance(value, str):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError("environment.conda", f"file '{path}' does not exist")
        return yaml.safe_load(path.read_text()) or {}
    return dict(value)


def _read_pip(value: Any) -> List[str]:
    if value is None:
        return []
    if isinstance(value, str):
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigError("environment.pip", f"requirements file '{path}' does not exist")
        return [l.split("#")[0].strip() for l in path.read_text().splitlines() if l.split("#")[0].strip()]
    return [str(p) for p in value]


def from_config(env: Dict[str, Any]) -> EnvironmentSpec:
    """The resolved `environment` node -> a full spec (a curated name brings its catalog entry)."""
    name = str(env.get("name") or "current")
    check_name(name)
    base = CURATED.get(name, {})
    python = env.get("python") or {}
    conda = _read_conda(env.get("conda")) if env.get("conda") is not None else copy.deepcopy(base.get("conda"))
    spec = EnvironmentSpec(
        name=name,
        version=env.get("version"),
        python_version=(base.get("python") or {}).get("version") or _python_from_conda(conda),
        user_managed=bool(python.get("user_managed", True)) if not base else bool(python.get("user_managed", False)),
        interpreter=python.get("interpreter"),
        conda=conda,
        pip=_read_pip(env.get("pip")),
        base_image=(env.get("docker") or {}).get("base_image") or (base.get("docker") or {}).get("base_image"),
        environment_variables={str(k): str(v) for k, v in (env.get("environment_variables") or {}).items()},
        setup=[str(s) for s in env.get("setup") or []],
    )
    return spec


def _python_from_conda(conda: Optional[Dict[str, Any]]) -> Optional[str]:
    for dep in (conda or {}).get("dependencies", []):
        if isinstance(dep, str) and dep.replace(" ", "").startswith("python="):
            return dep.split("=", 1)[1].strip().lstrip("=")
    return None


def current_python() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"


def _requirement_name(text: str) -> str:
    """A pip requirement's project name, normalised (`SetupTools>=60` -> setuptools)."""
    return re.split(r"[\s<>=!~\[;@]", text.strip(), maxsplit=1)[0].lower().replace("_", "-")
