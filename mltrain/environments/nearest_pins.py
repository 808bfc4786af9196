"""Pins with no wheel for the Python mltrain builds environments with, moved to the nearest release that has one.

A conda file or requirements list written for Azure's image pins what that image's Python installs
(`python=3.8`, `scikit-learn=0.24.2`, `scipy=1.7.1` in Azure's scikit-learn HyperDrive notebook). mltrain
builds a virtual environment on its own interpreter (3.11 here), where such a release has no wheel and pip
tries to compile it from source, and fails. After a build fails, each pin (`==X`, `==X.*`, `~=X`) that no
release with a wheel for this Python satisfies is moved to the first later release that has one (pip's own index
listing, `pip index versions --only-binary=:all:`, says which), and the build is tried once more; the moves
are said once and recorded with the environment (`moved_pins.json`), as the curated environments' are.
A pin whose project has no wheel at all (a source-only package) is left as written: it may build.

An unpinned package whose newest release no longer imports beside an older release of another package it says it
accepts (its metadata is wrong, and pip believes it) gets the bound of the newest release that does, before the
first build (`bounds`); said and recorded as the moved pins are.
"""
from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

#: Where the environment records the pins it moved (read back into run.json).
MOVED_FILE = "moved_pins.json"
#: {unpinned package: (the package its newest releases need a newer release of than they declare, the first
#: release of that package they import beside, the bound the unpinned one gets when the environment's own
#: requirement of that package admits no release from there on)}.
#: scikit-learn-intelex 2026.2.0 asks for scikit-learn >= 1.0 and imports `sklearn.utils._array_api` (1.2) and
#: `validate_data` (1.6); 2024.7.0 to 2026.1.0 import and patch beside scikit-learn 1.1.3 and 1.5 (measured
#: 2026-11-28 on Python 3.11; Azure's scikit-learn HyperDrive notebook, whose 0.24.2 pin moves to 1.1.3).
BESIDE_OLDER: Dict[str, Tuple[str, str, str]] = {
    "scikit-learn-intelex": ("scikit-learn", "1.6", "<2026.2"),
}
_EXACT = re.compile(r"^(?:==|~=)\s*([0-9][0-9A-Za-z.+!-]*?)(\.\*)?$")


def exact_version(requirement: str) -> Optional[Version]:
    """The release a pin names (`x==1.2`, `x==1.2.*`, a compatible release `x~=0.20.0`), else None."""
    try:
        req = Requirement(requirement)
    except InvalidRequirement:
        return None
    specs = list(req.specifier)
    if len(specs) != 1:
        return None
    m = _EXACT.match(str(specs[0]))
    if not m:
        return None
    try:
        return Version(m.group(1))
    except InvalidVersion:
        return None


def wheel_versions(name: str, python: str) -> List[Version]:
    """The releases of `name` that have a wheel for Python `python` (newest first), as pip's index lists them;
    empty when the index cannot say (no network, no such project, a source-only project)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name, "--python-version", python,
                          "--only-binary=:all:", "--disable-pip-version-check", "--no-input"],
                         capture_output=True, text=True, timeout=120)
    line = next((x for x in out.stdout.splitlines() if x.startswith("Available versions:")), "")
    found = []
    for text in line.split(":", 1)[-1].split(","):
        try:
            found.append(Version(text.strip()))
        except InvalidVersion:
            continue
    return found


def nearest(requirement: str, python: str) -> Optional[str]:
    """The requirement moved to the nearest release with a wheel for `python`, or None to keep it."""
    pinned = exact_version(requirement)
    if pinned is None:
        return None
    req = Requirement(requirement)
    name = req.name
    available = wheel_versions(name, python)
    if not available or any(req.specifier.contains(v, prereleases=True) for v in available):
        return None
    later = sorted(v for v in available if v > pinned)
    chosen = later[0] if later else max(available)
    return f"{name}=={chosen}"


def moves(packages: List[str], python: str) -> Dict[str, str]:
    """{requirement as written: the one to install instead} for the exact pins with no wheel for `python`."""
    exact = [p for p in packages if exact_version(p) is not None]
    with ThreadPoolExecutor(max_workers=4) as pool:
        found = dict(zip(exact, pool.map(lambda p: nearest(p, python), exact)))
    return {old: new for old, new in found.items() if new is not None}


def bounds(packages: List[str]) -> Dict[str, str]:
    """{unpinned requirement as written: the bounded one to install} for the packages of BESIDE_OLDER whose
    newest releases do not import beside the release of the other package these requirements allow."""
    parsed: List[Tuple[str, Requirement]] = []
    for p in packages:
        try:
            parsed.append((p, Requirement(p)))
        except InvalidRequirement:
            continue
    by_name: Dict[str, Requirement] = {}
    for _, req in parsed:
        by_name.setdefault(canonicalize_name(req.name), req)
    out = {}
    for p, req in parsed:
        rule = BESIDE_OLDER.get(canonicalize_name(req.name))
        if rule is None or len(req.specifier) or req.url:
            continue
        other, first, bound = rule
        theirs = by_name.get(other)
        if theirs is not None and len(theirs.specifier) and not _admits_from(theirs, Version(first)):
            out[p] = f"{p.strip()}{bound}"
    return out


def _admits_from(req: Requirement, first: Version) -> bool:
    """Whether the requirement allows some release `first` or later: probed at `first`, the minor releases after
    it, the release it pins (`==1.6.1`) and a far later one."""
    pinned = exact_version(str(req))
    probes = [first, *(Version(f"{first.major}.{first.minor + k}") for k in range(1, 30)),
              Version(f"{first.major + 1000}")] + ([pinned] if pinned is not None and pinned >= first else [])
    return any(req.specifier.contains(v, prereleases=True) for v in probes)
