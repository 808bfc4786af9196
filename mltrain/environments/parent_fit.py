"""Packages seen through the parent that the environment's own pins break, given releases that fit.

A built environment sees this interpreter's packages after its own (`_mltrain_parent.pth`), so mltrain and
torch stay importable in the ranks. When its own pins replace a package those parent packages were built
for, they break at import: a conda file of Azure's scikit-learn HyperDrive notebook gets numpy 1.25 (scipy
1.9.2 asks for numpy < 1.26), and this interpreter's pandas 3 (numpy >= 1.26, its C extension built against
numpy 2) then fails to import in the trial (`C extension: None not built`), through mlflow's autologging.
Azure's image has no such mix: everything in it was resolved together.

After a build, each parent package one of whose requirements a package of the environment's own no longer
satisfies is installed into the environment too, the release pip picks with the environment's own packages
held at their versions (a constraints file), so it shadows the parent's. Said once and recorded with the
environment. mltrain itself and torch's family are left as they are: the first is what runs the ranks, the
others are gigabytes; a conflict of theirs is said, not "fixed".
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable, Dict, List, Sequence

from packaging.utils import canonicalize_name

#: Where the environment records the parent packages it was given releases of (read back into run.json).
FIT_FILE = "parent_fit.json"
#: Parent packages never installed again into an environment (see above).
KEPT = {"mltrain", "torch", "torchvision", "torchaudio", "triton"}

#: Run by the environment's own interpreter (isolated, -I: a project's own `copy.py` in the folder mltrain was
#: started in is not imported instead of the standard library's): {parent package: its requirements the environment's own break}.
_FIND = r"""
import json, os, sys
from importlib.metadata import distributions
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
own_site = sys.argv[1]
own, parent = {}, {}
for d in distributions():
    name = d.metadata["Name"]
    if not name:
        continue
    where = str(d.locate_file(""))
    (own if where.rstrip("/") == own_site.rstrip("/") else parent).setdefault(canon(name), d)
def tops(d):
    text = d.read_text("top_level.txt")
    if text:
        return {t.strip() for t in text.split() if t.strip()}
    names = set()
    for f in d.files or []:
        first = f.parts[0]
        if len(f.parts) > 1 and not first.endswith((".dist-info", ".data")) and first != "..":
            names.add(first)
        elif f.suffix in (".py", ".so") and len(f.parts) == 1:
            names.add(first.split(".")[0])
    return names
def shadowed(d):
    found = tops(d)
    return bool(found) and all(os.path.exists(os.path.join(own_site, t)) or os.path.exists(os.path.join(own_site, t + ".py"))
                               for t in found)
broken = {}
for name, d in parent.items():
    if name in own or shadowed(d):
        continue  # shadowed: the environment's own release (or another of its packages) is the one imported
    for text in d.requires or []:
        try:
            req = Requirement(text)
        except Exception:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        mine = own.get(canon(req.name))
        if mine is not None and not req.specifier.contains(mine.version, prereleases=True):
            broken.setdefault(d.metadata["Name"], []).append(f"{text.split(';')[0].strip()} (has {mine.version})")
print(json.dumps(broken))
"""


def broken_parents(python: str, own_site: Path) -> Dict[str, List[str]]:
    """{parent package: its requirements that the environment's own packages do not satisfy}."""
    out = subprocess.run([python, "-I", "-c", _FIND, str(own_site)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        return {}
    return dict(json.loads(out.stdout or "{}"))


def fit(python: str, own_site: Path, install: Callable[[Sequence[str]], subprocess.CompletedProcess],
        log: Callable[[str], None], name: str) -> Dict[str, str]:
    """Install releases of the broken parent packages that fit the environment's own; returns {package: the
    release installed} (empty when nothing was broken or pip found nothing that fits)."""
    broken = broken_parents(python, own_site)
    kept = sorted(p for p in broken if canonicalize_name(p) in KEPT)
    wanted = sorted(p for p in broken if canonicalize_name(p) not in KEPT)
    if kept:
        log(f"environment {name}: " + "; ".join(f"{p} (seen from mltrain's interpreter) wants "
                                                + ", ".join(broken[p]) for p in kept)
            + ": left as it is")
    if not wanted:
        return {}
    constraints = own_site / "_mltrain_own.txt"
    constraints.write_text(_own_pins(python, own_site))
    try:
        done = install([*wanted, "-c", str(constraints)])
        unfit = [] if done.returncode == 0 else [p for p in wanted if install([p, "-c", str(constraints)]).returncode]
    finally:
        constraints.unlink()
    if unfit:
        log(f"environment {name}: packages seen from mltrain's interpreter that this environment's own break "
            f"have no release that fits it ({'; '.join(f'{p}: ' + ', '.join(broken[p]) for p in unfit)}): a job "
            "importing them will fail")
    wanted = [p for p in wanted if p not in unfit]
    if not wanted:
        return {}
    versions = _versions(python, own_site, wanted)
    log(f"environment {name}: packages seen from mltrain's interpreter that this environment's own pins break "
        "were given releases that fit: " + ", ".join(f"{p} ({', '.join(broken[p])}) -> {p}=={versions.get(p, '?')}"
                                                    for p in wanted))
    return {p: versions.get(p, "?") for p in wanted}


def _own_pins(python: str, own_site: Path) -> str:
    code = ("import sys; from importlib.metadata import distributions; "
            "print('\\n'.join(sorted({d.metadata['Name'] + '==' + d.version for d in distributions(path=[sys.argv[1]]) "
            "if d.metadata['Name']})))")
    return subprocess.run([python, "-I", "-c", code, str(own_site)], capture_output=True, text=True, timeout=120,
                          check=True).stdout


def _versions(python: str, own_site: Path, names: List[str]) -> Dict[str, str]:
    code = ("import sys, json; from importlib.metadata import distributions; "
            "print(json.dumps({d.metadata['Name']: d.version for d in distributions(path=[sys.argv[1]])}))")
    out = subprocess.run([python, "-I", "-c", code, str(own_site)], capture_output=True, text=True, timeout=120)
    found = {canonicalize_name(k): v for k, v in json.loads(out.stdout or "{}").items()}
    return {n: found[canonicalize_name(n)] for n in names if canonicalize_name(n) in found}
