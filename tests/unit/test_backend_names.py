"""No module outside mltrain/backends/ names a backend (issue 33): adding one is its package, its table
lines (mltrain.backends.BACKENDS, mltrain.jobspec.computes.COMPUTES) and, for a built-in compute kind, its
schema beside that table (mltrain/jobspec/NAME_compute.py), not edits across the core.

Two words are also other things, and stay where they mean those: `mpi`, the distribution kind
(`distribution=mpi`, Azure's MpiConfiguration), and `local`, Azure's own word for running on the
submitting machine (a v1 run configuration's `target="local"`, a workspace's location) in the Azure
stand-ins."""
import ast
from pathlib import Path

import mltrain
from mltrain import backends

ROOT = Path(mltrain.__file__).parent
AZURE_WORDS = {"local": ("_azureml_shim", "sdk_v2")}


def _strings(path: Path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_backend_names_appear_only_in_their_packages():
    names = (set(backends.BACKENDS) - {"mpi"}) | {"mpirun"}  # mpirun: the mpi backend's program
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if parts[0] == "backends" or (parts[0] == "jobspec" and (path.name == "computes.py"
                                                                  or path.name.endswith("_compute.py"))):
            continue
        for line, value in _strings(path):
            if value in names and not any(p in parts for p in AZURE_WORDS.get(value, ())):
                found.append(f"{path.relative_to(ROOT.parent)}:{line}: {value!r}")
    assert not found, "backend names outside mltrain/backends/:\n" + "\n".join(found)
