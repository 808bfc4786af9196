"""Azure references resolved to local things, never silently: environments through the curated
catalog, `azureml:NAME` computes through `.mltrain/compute/NAME.yaml`, data assets through
`.mltrain/data/NAME.yaml`, datastore and web URIs through the prefix map `.mltrain/datastores.yaml`.

A repository keeps these mappings once, in the `.mltrain/` folder nearest to its job files (or in the
folder mltrain is started from); anything unmapped is one line naming what to add.
"""
from __future__ import annotations

import difflib
import os
import platform
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import yaml

from mltrain.azureml.downloads import fetch, planned, web_address
from mltrain.azureml.v2_schema import check_fields
from mltrain.azureml.yaml_lines import JobFile, load
from mltrain.base.home import mltrain_home
from mltrain.config.paths import builtin_conf_dir, shipped_options
from mltrain.environments.conda import to_pip
from mltrain.environments.spec import AZURE_CLIENT

#: `azureml:NAME@latest`, `azureml:NAME:VERSION`, `azureml:NAME` (Azure's short asset syntax).
SHORT = re.compile(r"^azureml:(?!//)([A-Za-z0-9_.-]+)(?:@([A-Za-z0-9_.-]+)|:([A-Za-z0-9_.-]+))?$")
#: `azureml://registries/REG/environments|components/NAME/labels/L` or `/versions/V` (or neither).
REGISTRY = re.compile(r"^azureml://registries/([^/]+)/(environments|components|models|data)/([^/]+)"
                      r"(?:/(labels|versions)/([^/]+))?/?$")
#: Images that are an OS, MPI and conda (Azure ML's published bases): the conda file is the environment.
AZUREML_BASE_IMAGES = ("mcr.microsoft.com/azureml/",)
#: Docker Hub's official Python images: a CPython, which the host already is.
PYTHON_IMAGE = re.compile(r"^(?:docker\.io/)?(?:library/)?python(?::([0-9][^-]*|latest).*)?$")
DATASTORES_FILE = "datastores.yaml"
#: The workspace's default datastore (v1's `get_default_datastore()`), and Azure's expression for its name.
DEFAULT_DATASTORE = "workspaceblobstore"
DEFAULT_PREFIX = f"azureml://datastores/{DEFAULT_DATASTORE}/paths/"
DEFAULT_DATASTORE_EXPRESSION = re.compile(r"\$\{\{\s*default_datastore\s*\}\}")
#: An environment's fields, inline or in its own file (reference-yaml-environment).
ENVIRONMENT_FIELDS = ("name", "version", "image", "conda_file", "build", "description", "tags", "os_type",
                      "inference_config", "$schema", "datastore", "properties", "intellectual_property")


def config_dirs(jf: JobFile) -> List[Path]:
    """The `.mltrain` folders that map names for this file: the nearest one above it, then the
    current folder's (mltrain's own search path adds `.mltrain` and `conf` there too)."""
    found: List[Path] = []
    here = Path(jf.folder)
    home = Path(os.path.expanduser("~")).resolve()
    for folder in (here, *here.parents):
        candidate = folder / ".mltrain"
        if candidate.is_dir() and candidate.resolve() != home / ".mltrain":
            found.append(candidate.resolve())
            break
        if folder == home:
            break
    cwd = (Path.cwd() / ".mltrain").resolve()
    if cwd.is_dir() and cwd not in found and cwd != home / ".mltrain":
        found.append(cwd)
    return found


def _options(dirs: Sequence[Path], group: str) -> List[str]:

    names = set()
    for base in [*dirs, builtin_conf_dir()]:
        folder = base / group
        if folder.is_dir():
            names |= {p.stem for p in folder.glob("*.y*ml")}
    return sorted(names)


def asset_name(value: str) -> Optional[str]:
    """NAME of `azureml:NAME@latest`, `azureml:NAME:1` or a registry URI; None for anything else."""
    short = SHORT.match(value)
    if short:
        return short.group(1)
    registry = REGISTRY.match(value)
    return registry.group(3) if registry else None


# ------------------------------------------------------------------------------------- compute


def compute(jf: JobFile, path: Sequence[Any], value: Any) -> Optional[str]:
    """The `compute=` option for an Azure compute name; None runs locally."""
    if value is None:
        return None
    name = str(value)
    name = name[len("azureml:"):] if name.startswith("azureml:") else name
    dirs = config_dirs(jf)
    shipped = shipped_options("compute")
    mapped = [o for o in _options([d for d in dirs], "compute") if o not in shipped]
    if name in mapped or name in shipped:
        return name
    if name == "serverless" or not mapped:
        return None  # nothing mapped: this machine (said once by the caller)
    raise jf.error(tuple(path), f"compute '{name}' is not mapped here (known: {', '.join(mapped)}); add "
                                f"{dirs[0] if dirs else '.mltrain'}/compute/{name}.yaml, e.g. "
                                "`defaults: [slurm_schema, _self_]` with `partition: ...`")


# -------------------------------------------------------------------------------- environments


@dataclass
class Environment:
    option: str = "current"                                   # the `environment=` option
    values: Dict[str, Any] = field(default_factory=dict)      # environment.* set on top of it
    notes: List[str] = field(default_factory=list)            # said once on the console


def environment(jf: JobFile, path: Sequence[Any], value: Any, on_cluster: bool) -> Environment:
    path = tuple(path)
    if value is None:
        return Environment(notes=["no environment given: the job runs in mltrain's own interpreter"])
    if isinstance(value, str) and value.startswith("file:"):
        return _environment_file(jf, path, value, on_cluster)
    if isinstance(value, str):
        return _named(jf, path, value)

    spec = check_fields(jf, path, value, ENVIRONMENT_FIELDS)
    if spec.get("build"):
        raise jf.error(path + ("build",), "a Docker build context needs a container build service (Azure builds "
                                          "it); build the image yourself and name it in `image`")
    image = spec.get("image")
    conda = spec.get("conda_file")
    out = Environment()
    if conda is not None:
        out.values = _conda_environment(jf, path + ("conda_file",), conda, out.notes)
    if image is None:
        return out
    image = str(image)
    if image.startswith(AZUREML_BASE_IMAGES) and conda is not None:
        out.notes.append(f"image {image} is one of Azure ML's base images (an OS, MPI and conda): the job runs on "
                         "this host in a virtual environment built from its conda_file")
        return out
    python = PYTHON_IMAGE.match(image)
    if python:
        out.notes.append(f"image {image} is Docker Hub's Python: the job runs on this host's Python "
                         f"{platform.python_version()}"
                         + (" with the packages of its conda_file" if conda is not None else ""))
        return out
    if not on_cluster:
        raise jf.error(path + ("image",), f"image {image} needs a container runtime, and mltrain runs images only "
                                          "on Slurm (pyxis or apptainer): add compute=slurm, or use a curated "
                                          "environment or a conda_file")
    out.values.setdefault("docker", {})["base_image"] = image
    return out


def _environment_file(jf: JobFile, path: tuple, value: str, on_cluster: bool) -> Environment:
    """`environment: file:./env.yml`: Azure's environment YAML in its own file, read as if written
    inline; its `conda_file` and `build` are relative to that file, and its errors name its lines."""
    file = Path(jf.folder) / value[len("file:"):]
    if not file.is_file():
        raise jf.error(path, f"environment file '{value}' does not exist (relative to {jf.folder})")
    env = load(str(file))
    if not isinstance(env.data, dict):
        raise env.error((), "an environment file is a mapping of fields (image, conda_file, ...)")
    return environment(env, (), env.data, on_cluster)


def _named(jf: JobFile, path: tuple, value: str) -> Environment:
    if value.startswith("azureml:/subscriptions/") or value.startswith("/subscriptions/"):
        raise jf.error(path, "an ARM resource id names an environment in one Azure workspace; use azureml:NAME@latest")
    name = asset_name(value) or value
    options = _options(config_dirs(jf), "environment")
    for candidate in (name, f"AzureML-{name}"):
        if candidate in options:
            return Environment(option=candidate)

    close = difflib.get_close_matches(f"AzureML-{name}", options, n=3, cutoff=0.5)
    hint = f"closest: {', '.join(close)}; " if close else ""
    raise jf.error(path, f"environment '{value}' is not a curated environment and not in .mltrain/environment/ "
                         f"({hint}`mltrain env list` shows them)")


def _conda_environment(jf: JobFile, path: tuple, conda: Any, notes: List[str]) -> Dict[str, Any]:
    """An inline environment's conda file, as mltrain builds a custom environment: its pip packages
    become a cached virtual environment on this host's Python."""

    if isinstance(conda, dict):  # its content, inline (azure-ai-ml's Environment entity holds the file's data)
        file, data = Path("conda_file"), conda
    else:
        file = Path(jf.folder) / str(conda)
        if not file.is_file():
            raise jf.error(path, f"conda file '{conda}' does not exist (relative to {jf.folder})")
        try:
            data = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise jf.error(path, f"{file.name} is not valid YAML: {getattr(exc, 'problem', exc)}") from None
    deps: List[Any] = []
    provided: List[str] = []
    for dep in data.get("dependencies") or []:
        if isinstance(dep, str) and re.match(r"^python\s*[=<>]", dep):
            notes.append(f"{file.name} asks for {dep}; mltrain builds its environments on this host's Python")
            continue
        if isinstance(dep, str) and to_pip(dep) is None:
            raise jf.error(path, f"{file.name}: '{dep}' is a conda package with no PyPI equivalent, and mltrain builds "
                                 "a conda file as a virtual environment of PyPI packages: drop it, or name an image "
                                 "that has it (runs on Slurm)")
        if isinstance(dep, dict) and "pip" in dep:
            kept = [p for p in dep["pip"] if not AZURE_CLIENT.match(str(p))]
            provided += [str(p) for p in dep["pip"] if AZURE_CLIENT.match(str(p))]
            dep = {"pip": kept}
        deps.append(dep)
    if provided:
        notes.append(f"{', '.join(provided)}: Azure's client packages are provided by mltrain (its azureml.core "
                     "stand-in, MLflow tracking), not installed")
    name = str(data.get("name") or Path(file).stem)
    name = name if not name.startswith("AzureML") else f"custom-{name}"
    return {"name": name, "python": {"user_managed": False},
            "conda": {"channels": list(data.get("channels") or []), "dependencies": deps}}


# ----------------------------------------------------------------------------------------- data


def data_input(jf: JobFile, path: Sequence[Any], uri: Any, dry_run: bool) -> Tuple[str, Optional[str]]:
    """(the local file or folder an input's `path` stands for, the web address it is downloaded from or
    None). A web file is downloaded now unless this is a dry run, which names the file it will be."""
    path = tuple(path)
    value = DEFAULT_DATASTORE_EXPRESSION.sub(DEFAULT_DATASTORE, str(uri))
    dirs = config_dirs(jf)
    name = asset_name(value)
    if name is not None and not value.startswith("azureml://datastores/"):
        return _data_asset(jf, path, value, name, dirs, dry_run)
    if "://" in value and not value.startswith("file://"):
        web = web_address(value)
        local = datastore_folder(value, dirs) or (_mapped(web, dirs) if web else None)
        if local is not None:
            if not os.path.exists(local):  # else the job's own code fails on it (a FileNotFoundError of its rank)
                raise jf.error(path, f"'{value}' is {_found_how(value, local, dirs)}, which does not exist: put "
                                     "the file there or map the URI elsewhere")
            return local, None
        if web is not None:
            if dry_run:
                return planned(web), web
            return fetch(web, on_error=lambda why: jf.error(path, why)), web
        where = dirs[0] if dirs else Path.cwd() / ".mltrain"
        raise jf.error(path, f"'{value}' has no local copy: map a prefix of it to a folder in "
                             f"{where / DATASTORES_FILE} (e.g. '{_prefix_hint(value)}': /data/...)")
    local = value[len("file://"):] if value.startswith("file://") else value
    full = Path(jf.folder) / os.path.expanduser(local)
    if not full.exists():
        raise jf.error(path, f"'{value}' does not exist (relative to {jf.folder})")
    return str(full.resolve()), None


def datastore_folder(uri: str, dirs: Sequence[Path]) -> Optional[str]:
    """The local folder of a datastore URI: a prefix mapped in datastores.yaml, else, for the workspace's
    default datastore (`workspaceblobstore`, Azure's `${{default_datastore}}`), its folder under mltrain's
    home, as v1's `ws.get_default_datastore()` has it; None when neither."""
    uri = DEFAULT_DATASTORE_EXPRESSION.sub(DEFAULT_DATASTORE, uri)
    mapped = _mapped(uri, dirs)
    if mapped is not None or not uri.startswith(DEFAULT_PREFIX):
        return mapped
    rest = uri[len(DEFAULT_PREFIX):].strip("/")
    return str(mltrain_home() / "datastores" / DEFAULT_DATASTORE / rest)


def _found_how(uri: str, local: str, dirs: Sequence[Path]) -> str:
    if _mapped(uri, dirs) is None and uri.startswith(DEFAULT_PREFIX):
        return f"{local} in the workspace's default datastore (not mapped in {DATASTORES_FILE})"
    return f"mapped to {local} by {DATASTORES_FILE}"


def _mapped(uri: str, dirs: Sequence[Path]) -> Optional[str]:

    best: Optional[tuple] = None
    for base in dirs:
        file = base / DATASTORES_FILE
        if not file.is_file():
            continue
        table = yaml.safe_load(file.read_text()) or {}
        for prefix, folder in table.items():
            if uri.startswith(str(prefix)) and (best is None or len(str(prefix)) > len(best[0])):
                best = (str(prefix), Path(base.parent) / os.path.expanduser(str(folder)))
    if best is None:
        return None
    rest = uri[len(best[0]):].lstrip("/")
    return str((best[1] / rest).resolve()) if rest else str(best[1].resolve())


def _prefix_hint(uri: str) -> str:
    match = re.match(r"^(azureml://datastores/[^/]+/paths/|[a-z]+://[^/]+/)", uri)
    return match.group(1) if match else uri


def _data_asset(jf: JobFile, path: tuple, value: str, name: str, dirs: Sequence[Path], dry_run: bool
                ) -> Tuple[str, Optional[str]]:

    for base in dirs:
        for suffix in (".yaml", ".yml"):
            file = base / "data" / f"{name}{suffix}"
            if file.is_file():
                asset = load(str(file))
                if not isinstance(asset.data, dict) or "path" not in asset.data:
                    raise asset.error(("path",), "a data asset file needs `path` (a local path or a mapped URI)")
                return data_input(asset, ("path",), asset.data["path"], dry_run)
    where = dirs[0] if dirs else Path.cwd() / ".mltrain"
    raise jf.error(path, f"data asset '{value}' is not registered here: add {where}/data/{name}.yaml with "
                         "`path: <local folder or file>` (Azure's data asset YAML)")


def fetched_when(path: str, url: str) -> str:
    """How a plan names a web input's file: downloaded already, or when the job starts."""
    if os.path.exists(path):
        return f"{path} (from {url}, downloaded before)"
    return f"{path} (downloaded from {url} when the job starts)"
