"""The direct registry and tracking paths (mltrain.models.sqlite_registry, mltrain.tracking.writers) are
taken only on a schema they were checked against (mltrain.tracking.store_schema):
when the installed MLflow's newest migration is not one of them, every registration quietly goes back
to MLflow's client (correct, and about 10x slower). This fails instead, so the new schema is checked
(tests/test_models_concurrent.py) and its revision added."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from mltrain.tracking.store_schema import KNOWN_REVISIONS


def _head(versions: Path) -> set:
    revisions, parents = set(), set()
    for path in versions.glob("*.py"):
        text = path.read_text()
        rev = re.search(r"^revision\s*=\s*['\"](\w+)['\"]", text, re.M)
        down = re.search(r"^down_revision\s*=\s*(.+)$", text, re.M)
        if rev:
            revisions.add(rev.group(1))
        if down:
            parents.update(re.findall(r"['\"](\w+)['\"]", down.group(1)))
    return revisions - parents


def test_the_installed_mlflows_schema_is_one_the_direct_path_knows():
    spec = importlib.util.find_spec("mlflow")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("MLflow is not installed (the `registry` extra)")
    versions = Path(list(spec.submodule_search_locations)[0]) / "store" / "db_migrations" / "versions"
    head = _head(versions)
    assert len(head) == 1, head
    assert head <= KNOWN_REVISIONS, f"MLflow's schema {head} is not checked by mltrain.tracking.store_schema"
