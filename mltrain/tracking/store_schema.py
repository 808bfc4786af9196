"""The embedded MLflow store's schema as mltrain's direct writers know it: the model registry's
(mltrain.models.sqlite_registry) and the mirror's (mltrain.tracking.writers). Either writes MLflow's tables
itself only where the store's Alembic revision is one checked here and every table it writes has exactly
the columns it was checked with; anything else goes through MLflow's client."""
from __future__ import annotations

import os
import sqlite3
from typing import Dict, Set

#: Alembic revisions of MLflow's schema whose registry tables are exactly REGISTRY_COLUMNS: MLflow 3.17's
#: (dc11669786a5) and 3.18's (f4a9b2c7d1e6; its three migrations add skill tables, extend issues and
#: change MCP server versions, none a table written here). A store migrated by a later MLflow is written
#: through MLflow until checked and added here.
KNOWN_REVISIONS = frozenset({"dc11669786a5", "f4a9b2c7d1e6"})
REGISTRY_COLUMNS = {
    "registered_models": {"name", "creation_time", "last_updated_time", "description", "workspace"},
    "registered_model_tags": {"key", "value", "name", "workspace"},
    "model_versions": {"name", "version", "creation_time", "last_updated_time", "description", "user_id",
                       "current_stage", "source", "run_id", "status", "status_message", "run_link",
                       "storage_location", "workspace"},
    "model_version_tags": {"key", "value", "name", "version", "workspace"},
}
#: The workspace MLflow writes where the caller gives none (mlflow.utils.workspace_utils.DEFAULT_WORKSPACE_NAME).
WORKSPACE = "default"


def schema_known(con: sqlite3.Connection, columns: Dict[str, Set[str]] = REGISTRY_COLUMNS) -> bool:
    """The store's Alembic revision is one checked here and each of `columns`' tables has exactly those columns."""
    try:
        revisions = {row[0] for row in con.execute("SELECT version_num FROM alembic_version")}
    except sqlite3.Error:
        return False
    if len(revisions) != 1 or not revisions <= KNOWN_REVISIONS:
        return False
    for table, names in columns.items():
        if {row[1] for row in con.execute(f"PRAGMA table_info({table})")} != names:
            return False
    return True


def workspaces_on() -> bool:
    return os.environ.get("MLFLOW_ENABLE_WORKSPACES", "").strip().lower() in ("true", "1")
