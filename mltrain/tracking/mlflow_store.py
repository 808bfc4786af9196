"""Where models and MLflow runs are kept: MLflow's tracking and registry store, a SQLite database
under $MLTRAIN_HOME by default (created on first use), or a team's MLflow server or database named
by MLTRAIN_TRACKING_URI. MLflow comes from the `registry` extra and is imported only here, only by
the commands that need it; nothing that composes, dry-runs or launches a job reaches this module.
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterator, Optional

from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home
from mltrain.runs import mlflow_run

URI_ENV = "MLTRAIN_TRACKING_URI"
INSTALL = "pip install 'mltrain[registry]'"


def uri() -> str:
    """The tracking and registry URI: MLTRAIN_TRACKING_URI, else SQLite in $MLTRAIN_HOME/mlflow.db."""
    return os.environ.get(URI_ENV) or f"sqlite:///{mltrain_home().resolve() / 'mlflow.db'}"


def sqlite_path() -> Optional[Path]:
    """The database file of a `sqlite:///` store (the embedded one, or one MLTRAIN_TRACKING_URI names); None
    for a server or another database."""
    found = re.fullmatch(r"sqlite:///([^?]+)", uri())
    return Path(found.group(1)) if found else None


def blobs_dir() -> Path:
    """Registered models' files, one folder per content digest: a version never changes, and
    deleting or cleaning the run it came from never breaks it."""
    return mltrain_home() / "models"


def artifact_root() -> Optional[str]:
    """Where runs' artifacts go on the embedded store: $MLTRAIN_HOME/artifacts (MLflow's own default is
    ./mlruns of the current folder); None for a server or database of a team's, which has its own."""
    return str(mltrain_home().resolve() / "artifacts") if uri().startswith("sqlite:") else None


def require_mlflow() -> Any:
    try:
        import mlflow  # optional
    except ImportError:
        raise MltrainError(f"the model registry and MLflow tracking need MLflow: {INSTALL}") from None
    return mlflow


#: How deep this thread is in locked(): the file lock is taken once per thread, not once per call.
_holding = threading.local()


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """One writer at a time on the embedded store. SQLite serialises writes itself, but MLflow's
    first-use schema creation (its Alembic migrations) races when several processes start together,
    and a version number is max + 1 read before the insert; a file lock closes both windows."""
    if not uri().startswith("sqlite:"):
        yield  # a server or a real database orders its own writers
        return
    if getattr(_holding, "depth", 0):
        # Already held by this thread: flock on a second descriptor would wait on this very process
        # (close_sweeps once made MLflow's client, which locks, inside its own lock: `runs sync` hung).
        _holding.depth += 1
        try:
            yield
        finally:
            _holding.depth -= 1
        return
    home = mltrain_home()
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "registry.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        _holding.depth = 1
        try:
            yield
        finally:
            _holding.depth = 0
            fcntl.flock(handle, fcntl.LOCK_UN)


_client = None


def client() -> Any:
    """An MlflowClient on the store, its schema created (under the lock) on first use."""
    global _client
    if _client is not None:
        return _client
    require_mlflow()
    for name in ("mlflow", "alembic"):  # their INFO lines ("Creating initial MLflow database tables") are not ours
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="mlflow")
    from mlflow import MlflowClient  # heavy
    from mlflow.tracking.registry import UnsupportedModelRegistryStoreURIException  # heavy

    with locked():
        _create_aside(MlflowClient)
        try:
            c = MlflowClient(tracking_uri=uri(), registry_uri=uri())
        except UnsupportedModelRegistryStoreURIException as exc:
            # MLflow's own text is several sentences and a link; the schemes it lists are what the user needs
            found = re.search(r"Supported URI schemes are: \[([^\]]*)\]", str(exc))
            schemes = ", ".join(s.strip(" '") for s in found.group(1).split(",") if s.strip(" '")) if found else "?"
            raise MltrainError(f"{URI_ENV}: '{uri()}' has a scheme MLflow cannot keep models in (supported: {schemes})") \
                from None
        c.search_registered_models(max_results=1)  # creates or upgrades the schema now, while locked
        c.search_experiments(max_results=1)
    _client = c
    return c


def _create_aside(client_class: Any) -> None:
    """A new embedded store is made whole under another name and renamed into place (called under the
    lock): a process killed while MLflow creates the schema (its Alembic migrations, seconds of DDL)
    leaves a file named `.mlflow.db.building-PID`, never a half-made mlflow.db that every later command
    fails on (`table _alembic_tmp_... already exists`)."""
    path = sqlite_path()
    if path is None or path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    for left in path.parent.glob(f".{path.name}.building-*"):  # a creator killed earlier: its work is redone
        left.unlink(missing_ok=True)
    building = path.with_name(f".{path.name}.building-{os.getpid()}")
    aside = client_class(tracking_uri=f"sqlite:///{building}", registry_uri=f"sqlite:///{building}")
    aside.search_registered_models(max_results=1)
    aside.search_experiments(max_results=1)
    os.replace(building, path)


def create_from_template() -> bool:
    """Whether the embedded store exists, made now if not from the run template (mltrain.runs.mlflow_run:
    MLflow's whole schema at this MLflow's revision, made once per machine by MLflow itself), its one run
    removed: a copy and a rename, no MLflow import. False where there is no template yet (MLflow makes
    the store then). Under the lock, built aside and renamed into place as _create_aside does."""
    path = sqlite_path()
    if path is None:
        return False
    if path.exists():
        return True
    template = mlflow_run.template_dir() / "template.db"
    if not template.is_file():
        return False
    with locked():
        if path.exists():
            return True
        path.parent.mkdir(parents=True, exist_ok=True)
        building = path.with_name(f".{path.name}.building-{os.getpid()}")
        shutil.copyfile(template, building)
        con = sqlite3.connect(str(building))
        try:
            with con:
                for table in ("latest_metrics", "metrics", "params", "tags", "runs"):
                    con.execute(f"DELETE FROM {table} WHERE run_uuid = ?", (mlflow_run.RUN_ID,))
                # MLflow's Default experiment (id 0) keeps its artifacts where mltrain's experiments do
                now = int(time.time() * 1000)
                con.execute("UPDATE experiments SET artifact_location = ?, creation_time = ?, last_update_time = ? "
                            "WHERE experiment_id = 0", (f"{artifact_root()}/0", now, now))
        finally:
            con.close()
        os.replace(building, path)
    return True
