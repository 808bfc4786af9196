"""Run at the start of every Python process of a job's package layer (mltrain.azureml.pip_layer copies
this file into the layer as `_mltrain_layer_site.py`, with a .pth line that calls switch()), and of a built
environment with an MLflow of its own (a conda file's `mlflow-skinny==2.3.2`: mltrain.runs.mlflow_run's
hook_environment, whose note is one for every run: each process finds its run from its variables). Standard
library only: the layer's interpreter may be any job environment's, where mltrain is not importable.

When the job has pip-installed an MLflow of its own into the layer (Azure's sweep example installs
`mlflow<2.19`), that MLflow cannot use the run's SQLite database: the database has the schema of
the MLflow that made mltrain's template (a newer Alembic revision than the job's version knows, and
an older one refuses it), and the job's version's SQL store may not import against the SQLAlchemy the
layer sees. So the process's MLFLOW_TRACKING_URI is pointed at a file store in the run folder, holding
the same run id, before any code reads it; mltrain folds that store into the run afterwards as it
folds the database (mltrain.runs.script_store says why a file store). A file store rather than a
database of the job's version: building one would mean running the job's MLflow (seconds, and its
own dependencies' failures) before the script starts; a file store is a few plain files written here.
Nothing changes for a job whose layer has no MLflow of its own, or the same version as mltrain's, or
whose tracking URI is not the one mltrain gave (the job chose its own).
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from typing import Any, Dict, Optional

#: The distributions that bring the `mlflow` module, in the order mltrain reads its own version.
DISTRIBUTIONS = ("mlflow_skinny", "mlflow")
#: The .pth line that runs switch() at each start of the interpreter (after _mltrain_job_environment.pth and
#: _mltrain_parent.pth: .pth files are read by name).
SITE_HOOK = "import _mltrain_layer_site; _mltrain_layer_site.switch()\n"
#: The note of a built environment (in its prefix), the same for every run: paths are the run's own.
NOTE = "mltrain-layer.json"
#: MLflow's RunStatus.RUNNING and SourceType.LOCAL, as its file store writes them.
RUNNING, LOCAL = 1, 4


def own_mlflow(site: str) -> Optional[str]:
    """The version of the MLflow installed into the layer itself (not the job environment's it sees
    behind it), from the names of its .dist-info folders: no import, no metadata parsing."""
    try:
        names = os.listdir(site)
    except OSError:
        return None
    found: Dict[str, str] = {}
    for name in names:
        stem = name[: -len(".dist-info")]
        if name.endswith(".dist-info") and stem.count("-") == 1:  # `{name}-{version}`, both without `-`
            dist, version = stem.split("-")
            found[dist.lower().replace(".", "_")] = version
    return next((found[d] for d in DISTRIBUTIONS if d in found), None)


def _yaml(values: Dict[str, Any]) -> str:
    # JSON scalars are YAML scalars: a path with `: ` or a quote in it stays one string.
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in values.items())


def make_store(store: str, experiment: str, run_id: str) -> None:
    """The file store with its one experiment and the run (RUNNING), made whole in a folder of its own
    and renamed into place, so ranks starting together agree on one."""
    if os.path.isfile(os.path.join(store, experiment, run_id, "meta.yaml")):
        return
    building = f"{store}.{os.getpid()}"
    now = int(time.time() * 1000)
    uri = "file://" + store
    try:
        run = os.path.join(building, experiment, run_id)
        for sub in ("metrics", "params", "tags", "artifacts"):
            os.makedirs(os.path.join(run, sub))
        os.makedirs(os.path.join(building, ".trash"))
        with open(os.path.join(building, experiment, "meta.yaml"), "w") as f:
            f.write(_yaml({"artifact_location": f"{uri}/{experiment}", "creation_time": now,
                           "experiment_id": experiment, "last_update_time": now, "lifecycle_stage": "active",
                           "name": "Default"}))
        with open(os.path.join(run, "meta.yaml"), "w") as f:
            f.write(_yaml({"artifact_uri": f"{uri}/{experiment}/{run_id}/artifacts", "end_time": None,
                           "entry_point_name": "", "experiment_id": experiment, "lifecycle_stage": "active",
                           "run_id": run_id, "run_name": "mltrain-run", "run_uuid": run_id, "source_name": "",
                           "source_type": LOCAL, "source_version": "", "start_time": now, "status": RUNNING,
                           "tags": [], "user_id": os.environ.get("USER") or "mltrain"}))
        os.rename(building, store)
    except OSError:
        pass  # another rank renamed its store into place first: that one is used
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _note(run_dir: str) -> Dict[str, Any]:
    """What the layer's maker noted for this run: in the run's folder where the layer is shared by the
    trials of a sweep (pip_layer.RUN_NOTE), else in the layer (or the built environment)."""
    try:
        with open(os.path.join(run_dir, "pip-layer.json")) as f:
            note = json.load(f)
        if os.path.realpath(note["layer"]) == os.path.realpath(sys.prefix):
            return dict(note)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    with open(os.path.join(sys.prefix, NOTE)) as f:
        return dict(json.load(f))


def switch() -> None:
    run_dir, run_id = os.environ.get("MLTRAIN_RUN_DIR"), os.environ.get("MLFLOW_RUN_ID")
    if not run_dir or not run_id:
        return
    try:
        layer = _note(run_dir)
        if layer.get("per_run"):  # a built environment's: the run's database and file store, by the run's folder
            layer = {**layer, "tracking_uri": "sqlite:///" + os.path.join(run_dir, layer["run_db"]),
                     "file_store": os.path.join(run_dir, layer["file_store_name"])}
        if not layer.get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") != layer["tracking_uri"]:
            return
        version = own_mlflow(os.path.dirname(os.path.abspath(__file__)))
        if version is None or version == layer.get("mlflow"):
            return
        make_store(layer["file_store"], layer["experiment"], run_id)
    except (OSError, ValueError, KeyError, TypeError):
        return  # the layer's note is unreadable: the process keeps the tracking mltrain gave it
    if os.path.isdir(layer["file_store"]):
        os.environ["MLFLOW_TRACKING_URI"] = "file://" + layer["file_store"]
