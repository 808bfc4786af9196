"""What goes over to a remote cluster, and how: its probe, mltrain itself at this version, a venv for it, and a
run's folder, each copied by content (a file the cluster already holds, by its sha256, is not sent again).

On the cluster, under its `$MLTRAIN_HOME` (as the remote session sets it, `~/.mltrain` by default):

    remote/blobs/<sha256>                      every file ever sent, once
    remote/mltrain/<version>-<digest>/         mltrain as this machine runs it (its package and Hydra plugins)
    remote/venv/                               the cluster's Python, with mltrain's driver-side requirements
    remote/projects/<digest>/                  a project sent with a sweep's or pipeline's driver (its content)
    remote/multiruns/<time>-<random>/          that driver's request, log, outcome and the runs it made
    runs/<run id>/                             the run, as on any Slurm compute (mltrain's own Slurm backend)

A folder appears only whole (mltrain.backends.remote.far_side receive), so a copy cut halfway is never run and
the next submit sends only what is missing.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple, Union

from mltrain.backends.remote import ssh
from mltrain.backends.remote.ssh import RemoteError

#: mltrain's requirements for its driver on the cluster (pip name, module): torch and the rest belong to the
#: job's environment, built there as on any Slurm compute.
DRIVER_REQUIREMENTS: List[Tuple[str, str]] = [
    ("hydra-core>=1.3,<1.4", "hydra"), ("omegaconf>=2.3", "omegaconf"), ("submitit>=1.5", "submitit"),
    ("cloudpickle>=2", "cloudpickle"), ("pathspec>=0.12", "pathspec"), ("packaging", "packaging"),
    ("psutil", "psutil"), ("pyyaml", "yaml"),
]
MIN_PYTHON = (3, 9)
#: mltrain's own package folder, as this process runs it
PACKAGE = Path(__file__).parents[2]

#: path in the destination -> a file here, or {"link": target} for a symbolic link
Entries = Dict[str, Union[Path, Dict[str, str]]]


@dataclass
class Cluster:
    """A remote cluster as its probe found it, with mltrain ready there."""

    login: str
    python: str                   # the cluster's own interpreter (compute.python)
    home: str                     # its $MLTRAIN_HOME, absolute
    path: str                     # its PATH
    venv_python: str = ""         # the interpreter mltrain's driver runs with there
    mltrain_dir: str = ""         # what goes first on PYTHONPATH there
    requirements: List[Tuple[str, str]] = field(default_factory=list)  # the venv's: (pip name, module)
    timings: Dict[str, float] = field(default_factory=dict)


_digests: Dict[Tuple[str, int, int], str] = {}


def digest(path: Path) -> str:
    """The file's sha256, computed once per process for an unchanged file (size and mtime)."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _digests[key] = h.hexdigest()
    return _digests[key]


VENV = "remote/venv"
#: a project sent with a sweep's or pipeline's driver, by its content; the driver's own folder
PROJECTS, MULTIRUNS = "remote/projects", "remote/multiruns"


def ready_marker(requirements: List[Tuple[str, str]]) -> str:
    """The file a venv holds once `requirements` are checked there (far_side.python writes it)."""
    return f"{VENV}/.mltrain-ready-" + hashlib.sha256(json.dumps(requirements).encode()).hexdigest()[:12]


def connect(login: str, python: str, extra: Sequence[Tuple[str, str]] = ()) -> Cluster:
    """Probe the cluster: refused in one line without Python 3.9+, without sbatch or without a writable home. The
    probe also says whether mltrain at this version and its venv are there already (then nothing else is asked).
    `extra`: requirements of the driver beyond mltrain's own (a HyperDrive sweep's Optuna), as (pip name, module)."""
    name, _ = mltrain_entries()
    requirements = DRIVER_REQUIREMENTS + list(extra)
    answer = parse(ssh.far_side(login, python, "probe", f"remote/mltrain/{name}", ready_marker(requirements),
                                timeout=60))
    version = tuple(answer["version"])
    if version < MIN_PYTHON:
        raise RemoteError(f"{login}: its {python} is Python {'.'.join(map(str, version))}; mltrain needs 3.9 or "
                          f"newer there (set compute.python to another interpreter of the cluster)")
    if not answer.get("sbatch"):
        raise RemoteError(f"{login}: sbatch is not on the PATH of its ssh sessions ({answer.get('path')}); "
                          f"a remote Slurm compute needs Slurm's clients there")
    if answer.get("writable") is not True:
        raise RemoteError(f"{login}: cannot write to $MLTRAIN_HOME there ({answer.get('writable')}); set "
                          f"MLTRAIN_HOME in that account's environment to a writable folder")
    cluster = Cluster(login, python, str(answer["home"]), str(answer["path"]), requirements=requirements)
    there = answer.get("there") or {}
    if there.get(f"remote/mltrain/{name}"):
        cluster.mltrain_dir = posixpath.join(cluster.home, "remote", "mltrain", name)
    if there.get(ready_marker(requirements)):
        cluster.venv_python = posixpath.join(cluster.home, VENV, "bin", "python")
    return cluster


def send(cluster: Cluster, entries: Entries, dest: str, start: Tuple[str, ...] = ()) -> Dict[str, Any]:
    """`entries` made into the folder `dest` on the cluster (a path under its home); only the files it does
    not hold yet travel. `start`: the run's driver started there once it is whole (far_side start's arguments).
    Returns the cluster's answer ({"made": False}: it was there already, whole)."""
    manifest: Dict[str, Any] = {}
    sources: Dict[str, Path] = {}
    for rel, source in entries.items():
        if isinstance(source, dict):
            manifest[rel] = source
            continue
        d = digest(source)
        manifest[rel] = [d, source.stat().st_mode & 0o777]
        sources.setdefault(d, source)
    wanted = json.dumps(sorted(sources)).encode()
    missing = parse(ssh.far_side(cluster.login, cluster.python, "missing", stdin=wanted, timeout=120))
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w") as tar:
        for d in missing:
            tar.add(str(sources[d]), arcname=f"blobs/{d}")
        text = json.dumps(manifest).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(text)
        tar.addfile(info, io.BytesIO(text))
    answer = parse(ssh.far_side(cluster.login, cluster.python, "receive", posixpath.join(cluster.home, dest),
                                *start, stdin=payload.getvalue(), timeout=600))
    return dict(answer)


def folder_entries(root: Path, into: str = "", skip: Tuple[str, ...] = ("__pycache__",)) -> Entries:
    """Every file and symbolic link under `root`, by its path under `into`."""
    out: Entries = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip and not (Path(dirpath) / d).is_symlink()]
        links = [d for d in os.listdir(dirpath) if (Path(dirpath) / d).is_symlink()]
        for name in sorted(set(filenames) | set(links)):
            path = Path(dirpath) / name
            rel = posixpath.join(into, path.relative_to(root).as_posix()) if into else path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = {"link": os.readlink(path)}
            elif path.is_file() and not name.endswith(".pyc"):
                out[rel] = path
    return out


def content_key(entries: Entries) -> str:
    """A name for a folder of `entries` that changes with any of its paths, contents or links."""
    h = hashlib.sha256()
    for rel in sorted(entries):
        source = entries[rel]
        h.update(rel.encode() + b"\0" + (digest(source).encode() if isinstance(source, Path) else
                                         json.dumps(source, sort_keys=True).encode()) + b"\n")
    return h.hexdigest()[:16]


_mltrain: List[Tuple[str, Entries]] = []


def mltrain_entries() -> Tuple[str, Entries]:
    """mltrain as this process runs it, and the name of its folder on a cluster (version and content)."""
    if _mltrain:
        return _mltrain[0]
    package = PACKAGE
    entries = folder_entries(package, "mltrain")
    plugins = package.parent / "hydra_plugins"
    if plugins.is_dir():
        for child in sorted(plugins.iterdir()):
            if child.name.startswith("mltrain") and child.is_dir():
                entries.update(folder_entries(child, f"hydra_plugins/{child.name}"))
    key = content_key(entries)
    try:
        from importlib.metadata import version as installed  # startup

        version = installed("mltrain")
    except Exception:  # noqa: BLE001 - a checkout run without installing: the content says which
        version = "0"
    _mltrain.append((f"{version}-{key[:12]}", entries))
    return _mltrain[0]


def ready(cluster: Cluster) -> Cluster:
    """mltrain at this version on the cluster, and a Python with its requirements: sent or made once."""
    if not cluster.mltrain_dir:
        name, entries = mltrain_entries()
        dest = f"remote/mltrain/{name}"
        send(cluster, entries, dest)
        cluster.mltrain_dir = posixpath.join(cluster.home, dest)
    if not cluster.venv_python:
        answer = parse(ssh.far_side(cluster.login, cluster.python, "python", posixpath.join(cluster.home, VENV),
                                    json.dumps(cluster.requirements), timeout=900))
        cluster.venv_python = str(answer["python"])
    return cluster


def parse(data: bytes) -> Any:
    try:
        return json.loads(data.decode("utf-8"))
    except ValueError:
        raise RemoteError(f"the cluster's answer was not understood: {data[:200]!r}") from None


def remapped(text: str, pairs: Sequence[Tuple[str, str]], as_json: bool = True) -> str:
    """Text (JSON text, as it escapes paths, unless `as_json` is False: a log) with each path of one side replaced
    by the other's, longest first: a run folder before the home that holds it."""
    for old, new in sorted(pairs, key=lambda p: -len(p[0])):
        if old:
            text = text.replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1]) if as_json else text.replace(old, new)
    return text
