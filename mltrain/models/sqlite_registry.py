"""A model version registered by writing MLflow's own registry tables in the embedded SQLite store, in
one transaction, without importing MLflow (about 2.5 s of imports and engine start-up per command).

The rows are the ones MLflow's SqlAlchemyStore.create_registered_model / create_model_version write
(tests/test_models_concurrent.py compares them column by column), and MLflow's client reads them back
as its own. This path is taken only where that holds: the embedded store exists, its schema is one this
module was checked against (mltrain.tracking.store_schema: the Alembic revision and every column of the four tables), MLflow's
workspaces are off, and every value is inside MLflow's own validation rules. Anything else returns None
and the caller goes through MLflow's client, which then applies MLflow's rules and messages.

`BEGIN IMMEDIATE` takes SQLite's write lock before the version number is read, so registrations from
many processes at once get consecutive versions, none twice (the caller also holds store.locked()).
"""
from __future__ import annotations

import posixpath
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Optional

from mltrain.tracking.store_schema import WORKSPACE, schema_known, workspaces_on

#: What MLflow writes where the caller gives nothing (model_registry STAGE_NONE, ModelVersionStatus.READY).
STAGE, STATUS = "None", "READY"
#: MLflow's tag-name rule (mlflow.utils.validation: letters, digits and `_-. /:`, not a path that
#: normalises to another name) and its limits; the columns' widths for the rest.
_TAG_KEY = re.compile(r"^[A-Za-z0-9_\-. /:]{1,250}$")
_TAG_VALUE_MAX, _DESCRIPTION_MAX, _SOURCE_MAX, _NAME_MAX = 100_000, 5000, 500, 256
_BUSY_TIMEOUT_S = 120.0


@dataclass
class Version:
    """The version written, with the fields mltrain.models.registry.Model reads from MLflow's ModelVersion."""

    name: str
    version: int
    source: str
    creation_timestamp: int
    description: Optional[str] = None
    run_id: Optional[str] = None
    tags: Dict[str, str] = field(default_factory=dict)


def create_version(db: Path, name: str, source: str, run_id: Optional[str], tags: Dict[str, str],
                   description: Optional[str]) -> Optional[Version]:
    """The next version of `name` (the registered model made if new), or None where MLflow must do it."""
    if not _plain(name, source, run_id, tags, description) or not db.is_file() or workspaces_on():
        return None
    con = sqlite3.connect(str(db), timeout=_BUSY_TIMEOUT_S, isolation_level=None)
    try:
        con.execute("BEGIN IMMEDIATE")
        try:
            if not schema_known(con):
                con.execute("ROLLBACK")
                return None
            now = int(time.time() * 1000)
            # MLflow: create_registered_model when get_registered_model finds none, then
            # create_model_version sets the model's last_updated_time to the version's creation time.
            con.execute("INSERT OR IGNORE INTO registered_models (name, creation_time, last_updated_time, "
                        "description, workspace) VALUES (?, ?, ?, NULL, ?)", (name, now, now, WORKSPACE))
            con.execute("UPDATE registered_models SET last_updated_time = ? WHERE workspace = ? AND name = ?",
                        (now, WORKSPACE, name))
            (top,) = con.execute("SELECT max(version) FROM model_versions WHERE workspace = ? AND name = ?",
                                 (WORKSPACE, name)).fetchone()
            version = (top or 0) + 1
            con.execute("INSERT INTO model_versions (name, version, creation_time, last_updated_time, description, "
                        "user_id, current_stage, source, run_id, status, status_message, run_link, "
                        "storage_location, workspace) VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, NULL, NULL, ?, ?)",
                        (name, version, now, now, description, STAGE, source, run_id, STATUS, source, WORKSPACE))
            con.executemany("INSERT INTO model_version_tags (key, value, name, version, workspace) "
                            "VALUES (?, ?, ?, ?, ?)", [(k, v, name, version, WORKSPACE) for k, v in tags.items()])
            con.execute("COMMIT")
        except BaseException:
            if con.in_transaction:
                con.execute("ROLLBACK")
            raise
    finally:
        con.close()
    return Version(name, version, source, now, description, run_id, dict(tags))


def _plain(name: str, source: str, run_id: Optional[str], tags: Dict[str, str], description: Optional[str]) -> bool:
    """Values MLflow would accept and store unchanged; anything else is MLflow's to accept or refuse."""
    if not name.strip() or len(name) > _NAME_MAX or len(source) > _SOURCE_MAX:
        return False
    if description is not None and len(description) > _DESCRIPTION_MAX:
        return False
    if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,32}", run_id):
        return False
    for key, value in tags.items():
        if not _TAG_KEY.match(key) or posixpath.normpath(key) != key or key.startswith(("/", "..")) or key == ".":
            return False
        if key.startswith("mlflow."):  # MLflow's own tags (a prompt's, ...) carry rules of their own
            return False
        if len(value) > _TAG_VALUE_MAX:
            return False
    return True
