"""A conda file's own packages (its `dependencies` outside the `pip:` section) in an environment mltrain
builds: a virtual environment takes PyPI packages, so each conda package is installed from PyPI under its
PyPI name and the same version (`numpy=1.23` is `numpy==1.23.*`, `pytorch` is `torch`); a package PyPI
does not have (a compiler, CUDA's toolkit, MPI, an R package) is refused in one line before anything
runs, never skipped to fail the job at import.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement

#: conda names whose PyPI package has another name.
RENAMED = {
    "pytorch": "torch", "pytorch-cpu": "torch", "pytorch-gpu": "torch", "py-xgboost": "xgboost",
    "py-xgboost-cpu": "xgboost", "py-xgboost-gpu": "xgboost", "matplotlib-base": "matplotlib",
    "py-opencv": "opencv-python", "opencv": "opencv-python", "tensorflow-gpu": "tensorflow",
    "tensorflow-cpu": "tensorflow", "python-graphviz": "graphviz", "pyqt": "PyQt5", "pytables": "tables",
    "msgpack-python": "msgpack",
}
#: conda packages with no PyPI equivalent: system libraries, toolchains, CUDA and MPI runtimes, conda's own.
NO_PYPI = frozenset({
    "cudatoolkit", "cudatoolkit-dev", "cudnn", "nccl", "cuda", "cuda-toolkit", "pytorch-cuda", "pytorch-mutex",
    "cpuonly", "magma", "openmpi", "mpich", "impi_rt", "intel-openmp-rt", "gcc", "gxx", "gfortran", "gcc_linux-64",
    "gxx_linux-64", "gfortran_linux-64", "libgcc-ng", "libstdcxx-ng", "libgfortran-ng", "libgomp", "_libgcc_mutex",
    "_openmp_mutex", "make", "openblas", "libopenblas", "blas", "libblas", "liblapack", "ca-certificates",
    "openssl", "libffi", "zlib", "xz", "sqlite", "tk", "readline", "ncurses", "bzip2", "libuuid", "krb5", "ld_impl_linux-64",
    "git", "openjdk", "nodejs", "ffmpeg", "graphviz", "libjpeg-turbo", "libpng", "conda", "mamba", "r-base", "r",
})
#: A conda match spec: [channel::]name[ version[ build]] or name=version[=build], a pip-style comparison too.
MATCH_SPEC = re.compile(r"^(?:[A-Za-z0-9_.\-/]+::)?(?P<name>[A-Za-z0-9_.\-]+)(?P<extras>\[[^\]]*\])?\s*(?P<rest>.*)$")


def to_pip(dep: str) -> Optional[str]:
    """The pip requirement for one conda package; None when PyPI has no such package."""
    match = MATCH_SPEC.match(dep.strip())
    if match is None:
        return dep
    name, rest = match["name"].lower(), match["rest"].strip()
    if name in NO_PYPI or name.startswith(("r-", "cuda-", "libcu", "libnv", "libnpp")):
        return None
    return RENAMED.get(name, match["name"]) + (match["extras"] or "") + _version(rest)


def _version(rest: str) -> str:
    """conda's version syntax as pip's: `=1.2` and `1.2` match 1.2.x (`==1.2.*`); a build string is dropped."""
    if not rest:
        return ""
    if rest.startswith("=") and not rest.startswith("=="):
        return "==" + _fuzzy(rest[1:].split("=")[0])
    if rest[0].isdigit() or rest[0] == "*":
        return "==" + _fuzzy(rest.split()[0])
    return rest.replace(" ", "")  # `>=1.20,<2` and `~=1.5.3`, as pip writes them


def _fuzzy(version: str) -> str:
    return version if version.endswith("*") else version + ".*"


def split(deps: List[str]) -> Tuple[List[Tuple[str, str]], List[str]]:
    """([(conda package, its pip requirement)], [conda packages PyPI does not have or pip cannot read])."""
    mapped: List[Tuple[str, str]] = []
    unmapped: List[str] = []
    for dep in deps:
        pip = to_pip(dep)
        if pip is None or not _readable(pip):
            unmapped.append(dep)
        else:
            mapped.append((dep, pip))
    return mapped, unmapped


def _readable(requirement: str) -> bool:
    try:
        Requirement(requirement)
    except InvalidRequirement:
        return False
    return True
