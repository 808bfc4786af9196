"""Pins with no wheel for the Python mltrain builds environments with, moved to the nearest release that has one.

A conda file or requirements list written for Azure's image pins what that image's Python installs
(`python=3.8`, `scikit-learn=0.24.2`, `scipy=1.7.1` in Azure's scikit-learn HyperDrive notebook). mltrain
builds a virtual environment on its own interpreter (3.11 here), where such a release has no wheel and pip
tries to compile it from source, and fails. After a build fails, each pin (`==X`, `==X.*`, `~=X`) that no
release with a wheel for this Python satisfies is moved to the first later release that has one (pip's own index
listing, `pip index versions --only-binary=:all:`, says which), and the build is tried once more; the moves
are said once and recorded with the environment (`moved_pins.json`), as the curated environments' are.
A pin whose project has no wheel at all (a source-only package) is left as written: it may build.
"""
from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

#: Where the environment records the pins it moved (read back into run.json).
MOVED_FILE = "moved_pins.json"
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
