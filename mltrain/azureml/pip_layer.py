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
at each start of the layer's Python by a .pth line) switches MLFLOW_TRACKING_URI, with what it needs
to know noted in the layer's mltrain-layer.json.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from mltrain.runs import mlflow_run, script_store

PIP_SCRIPT = "#!{python}\nimport sys\nfrom pip._internal.cli.main import main\nsys.exit(main())\n"
#: Run by site.py at each start of the layer's Python (after _mltrain_job_environment.pth: by name).
SITE_HOOK = "import _mltrain_layer_site; _mltrain_layer_site.switch()\n"


def _tracking(run_dir: Path) -> dict[str, object]:
    """What layer_site needs: the tracking URI mltrain gives the run's ranks, the MLflow version that made
    that database (no MLflow: nothing to switch), and where the file store goes."""
    env = mlflow_run.rank_env(str(run_dir))
    return {"tracking_uri": env.get("MLFLOW_TRACKING_URI"),
            "mlflow": mlflow_run.template_version() if env else None,
            "file_store": str(run_dir / script_store.FILE_STORE), "experiment": script_store.EXPERIMENT}


def make(run_dir: Path, interpreter: str) -> Path:
    layer = run_dir / "pip-layer"
    ready = layer / "mltrain-layer.json"
    if ready.is_file():
        return layer
    with open(run_dir / ".pip-layer.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.is_file():
            return layer
        paths = json.loads(subprocess.run([interpreter, "-c", "import sys, json; print(json.dumps(sys.path))"],
                                          capture_output=True, text=True, check=True).stdout)
        subprocess.run([interpreter, "-m", "venv", "--without-pip", str(layer)], check=True, capture_output=True)
        site = subprocess.run([str(layer / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        # after the layer's own packages: everything the job environment's interpreter imports from
        keep = [p for p in paths if p and os.path.isdir(p) and "site-packages" in p]
        (Path(site) / "_mltrain_job_environment.pth").write_text("\n".join(keep) + "\n")
        shutil.copyfile(Path(__file__).with_name("layer_site.py"), Path(site) / "_mltrain_layer_site.py")
        (Path(site) / "_mltrain_layer_site.pth").write_text(SITE_HOOK)
        for name in ("pip", "pip3"):
            script = layer / "bin" / name
            script.write_text(PIP_SCRIPT.format(python=layer / "bin" / "python"))
            script.chmod(0o755)
        ready.write_text(json.dumps({"interpreter": interpreter, "paths": keep, **_tracking(run_dir)}))
    return layer


def main() -> int:
    run_dir = Path(os.environ["MLTRAIN_RUN_DIR"])
    print(make(run_dir, sys.argv[1] if len(sys.argv) > 1 else sys.executable))
    return 0


if __name__ == "__main__":
    sys.exit(main())
