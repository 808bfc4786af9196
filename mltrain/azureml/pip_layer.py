"""A job's own package layer, so that `pip install` in an Azure command never changes an environment
other runs share (a cached built environment, or mltrain's own).

Run in the rank before a command that names pip: `python -m mltrain.azureml.pip_layer INTERPRETER` makes
`$MLTRAIN_RUN_DIR/pip-layer` once per run (a lock: every rank asks), a virtual environment without
packages of its own that sees the job environment's packages after its own (a .pth file listing that
interpreter's sys.path), with `pip`/`pip3` commands of its own; it prints the layer's folder, whose
`bin` then goes first on PATH. `pip install` installs into the layer, treats what the job environment
already has as installed, and never uninstalls from it (pip: "outside environment"): the versions pip
resolves for the job come first on the job's sys.path, and what the job environment has serves only
where it satisfies them (a fresh environment from the same index resolves the same versions).

A job that installs an MLflow of its own logs to a file store of the run's instead of the run's MLflow
database, which only mltrain's MLflow version can open: `_mltrain_layer_site.py` (layer_site.py, run
at each start of the layer's Python by a .pth line; mltrain.runs.layer_site) switches MLFLOW_TRACKING_URI, with what it needs
to know noted in the layer's mltrain-layer.json.

The trials of one sweep share one layer (`SWEEP_DIR/pip-layers/KEY`), made once, when every pip call in
their command is a plain `pip install` of the same text (KEY: the job environment's interpreter and those
calls): each trial's `pip install` would resolve the same packages into a fresh layer of its own, which
for Azure's sweep example (`pip install 'mlflow<2.19'`: MLflow and pyarrow, 240 MB) cost every trial
seconds of CPU a user's own loop pays once. The first trial installs, the others find the packages
installed; the layer's `pip` holds a lock on the layer while it runs, so trials that start together
install one at a time. A call with a shell variable in it (a trial's own parameter), `python -m pip`,
an editable or forced reinstall, or `pip uninstall` keeps a layer per trial. Each trial's own MLflow
note (its tracking URI, its file store) is then `RUN_DIR/pip-layer.json`.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

from mltrain.runs import layer_site, mlflow_run, script_store

#: The layer's `pip`: one pip at a time in the layer (ranks or trials that start together). pip runs as
#: `python -m pip` runs it (its public entry point; pip's own `main` is internal), and exits with its code.
PIP_SCRIPT = ("#!{python}\nimport fcntl, runpy\n"
              "with open({lock!r}, 'w') as lock:\n    fcntl.flock(lock, fcntl.LOCK_EX)\n"
              "    runpy.run_module('pip', run_name='__main__', alter_sys=True)\n")
#: Each trial's own MLflow note, in its run folder, where its layer is shared (read by layer_site).
RUN_NOTE = "pip-layer.json"
#: A pip call in a command: `pip`/`pip3` (the layer's) or `python -m pip`, up to the next shell operator.
PIP_CALL = re.compile(r"(?:^|[\s;&|(])((?:pip3?|\S*python3?\s+-m\s+pip)(?:\s[^;&|()\n]*)?)(?=[;&|()\n]|$)")
#: What keeps a layer per trial: a variable or substitution, an editable or forced (re)install.
NOT_SHARED = re.compile(r"[$`]|(?:^|\s)(?:-e|--editable|-I|--ignore-installed|--force-reinstall)(?:\s|=|$)")


def _tracking(run_dir: Path) -> dict[str, object]:
    """What layer_site needs: the tracking URI mltrain gives the run's ranks, the MLflow version that made
    that database (no MLflow: nothing to switch), and where the file store goes."""
    env = mlflow_run.rank_env(str(run_dir))
    return {"tracking_uri": env.get("MLFLOW_TRACKING_URI"),
            "mlflow": mlflow_run.template_version() if env else None,
            "file_store": str(run_dir / script_store.FILE_STORE), "experiment": script_store.EXPERIMENT}


def _shared(run_dir: Path, interpreter: str) -> Optional[Path]:
    """The layer the trials of this run's sweep share, or None (not a trial, or its pip calls may differ)."""
    try:
        doc = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return None
    sweep, command = (doc.get("sweep") or {}).get("dir"), doc.get("command") or []
    if not sweep or not command:
        return None
    calls = [c.strip() for c in PIP_CALL.findall(command[-1])]
    for call in calls:
        try:
            words = shlex.split(call)
        except ValueError:  # a quote this pattern cut in two: not a call to judge
            return None
        if words[0] not in ("pip", "pip3") or words[1:2] != ["install"] or NOT_SHARED.search(call):
            return None
    if not calls:
        return None
    key = hashlib.sha256("\0".join([interpreter, *calls]).encode()).hexdigest()[:16]
    return Path(sweep) / "pip-layers" / key


def _build(layer: Path, interpreter: str, note: dict) -> None:
    paths = json.loads(subprocess.run([interpreter, "-c", "import sys, json; print(json.dumps(sys.path))"],
                                      capture_output=True, text=True, check=True).stdout)
    shutil.rmtree(layer, ignore_errors=True)  # a build that died half way
    subprocess.run([interpreter, "-m", "venv", "--without-pip", str(layer)], check=True, capture_output=True)
    site = subprocess.run([str(layer / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # after the layer's own packages: everything the job environment's interpreter imports from
    keep = [p for p in paths if p and os.path.isdir(p) and "site-packages" in p]
    (Path(site) / "_mltrain_job_environment.pth").write_text("\n".join(keep) + "\n")
    shutil.copyfile(layer_site.__file__, Path(site) / "_mltrain_layer_site.py")
    (Path(site) / "_mltrain_layer_site.pth").write_text(layer_site.SITE_HOOK)
    for name in ("pip", "pip3"):
        script = layer / "bin" / name
        script.write_text(PIP_SCRIPT.format(python=layer / "bin" / "python", lock=str(layer / ".pip.lock")))
        script.chmod(0o755)
    (layer / layer_site.NOTE).write_text(json.dumps({"interpreter": interpreter, "paths": keep, **note}))


def make(run_dir: Path, interpreter: str) -> Path:
    shared = _shared(run_dir, interpreter)
    layer = shared or run_dir / "pip-layer"
    ready = layer / "mltrain-layer.json"
    if not ready.is_file():
        layer.parent.mkdir(parents=True, exist_ok=True)
        lock_file = layer.parent / f".{layer.name}.lock" if shared else run_dir / ".pip-layer.lock"
        with open(lock_file, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not ready.is_file():
                _build(layer, interpreter, {"shared": True} if shared else _tracking(run_dir))
    if shared:
        (run_dir / RUN_NOTE).write_text(json.dumps({"layer": str(layer), **_tracking(run_dir)}))
    return layer


def main() -> int:
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    print(make(run_dir, sys.argv[1] if len(sys.argv) > 1 else sys.executable))
    return 0


if __name__ == "__main__":
    sys.exit(main())
