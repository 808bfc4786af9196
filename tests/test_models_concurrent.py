"""The model registry's direct SQLite path (mltrain.models.sqlite_registry) against MLflow itself: the rows
it writes are the rows MLflow writes, MLflow's client and `mlflow.register_model` carry on from them, and
50 `mltrain models register` processes started at once leave versions 1..50, each exactly once (issue 27)."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import mltrain_exe, run_mltrain

CONCURRENT = 50


def _rows(db: Path, table: str, name: str) -> list:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in con.execute(f"SELECT * FROM {table} WHERE name = ? ORDER BY 1, 2, 3", (name,))]
    finally:
        con.close()


def _client(home: Path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def test_direct_registration_writes_the_rows_mlflow_writes(home, project, tmp_path):
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    assert run_mltrain("models", "list", cwd=project).rc == 0  # creates the store through MLflow
    db = home / "mlflow.db"
    r = run_mltrain("models", "register", "direct", "--path", str(model), "--tag", "stage=dev",
                    "--property", "owner=me", "--description", "first", cwd=project)
    assert r.rc == 0 and "registered direct:1" in r.out, r.err
    mine = _rows(db, "model_versions", "direct")[0]
    tags = {t["key"]: t["value"] for t in _rows(db, "model_version_tags", "direct")}
    client = _client(home)
    client.create_registered_model("by-mlflow")
    client.create_model_version("by-mlflow", source=mine["source"], tags=tags, description="first")
    theirs = _rows(db, "model_versions", "by-mlflow")[0]
    ignore = ("name", "creation_time", "last_updated_time")
    assert {k: v for k, v in mine.items() if k not in ignore} == {k: v for k, v in theirs.items() if k not in ignore}
    assert mine["creation_time"] == mine["last_updated_time"]
    assert [{k: v for k, v in t.items() if k != "name"} for t in _rows(db, "model_version_tags", "direct")] == \
        [{k: v for k, v in t.items() if k != "name"} for t in _rows(db, "model_version_tags", "by-mlflow")]
    (rm,) = _rows(db, "registered_models", "direct")
    (rm_theirs,) = _rows(db, "registered_models", "by-mlflow")
    assert rm["last_updated_time"] == mine["creation_time"] and rm["description"] == rm_theirs["description"]
    assert rm["workspace"] == rm_theirs["workspace"]
    # MLflow's client reads it as its own, and MLflow's own registration carries on from it
    mv = client.get_model_version("direct", "1")
    assert mv.status == "READY" and mv.description == "first" and mv.tags["stage"] == "dev"
    assert mv.tags["mltrain.property.owner"] == "me"
    import mlflow

    mlflow.set_registry_uri(f"sqlite:///{db}")
    assert int(mlflow.register_model(mine["source"], "direct").version) == 2
    r = run_mltrain("models", "register", "direct", "--path", str(model), cwd=project)
    assert r.rc == 0 and "registered direct:3" in r.out, r.err
    shown = json.loads(run_mltrain("models", "show", "direct:1", "--json", cwd=project).out)
    assert shown["tags"] == {"stage": "dev"} and shown["properties"] == {"owner": "me"}


def test_a_store_of_another_schema_goes_through_mlflow(home, project, tmp_path):
    """A schema this mltrain has not checked (a column added by another MLflow) is left to MLflow's client."""
    model = tmp_path / "model.pt"
    model.write_bytes(b"weights")
    assert run_mltrain("models", "list", cwd=project).rc == 0
    con = sqlite3.connect(home / "mlflow.db")
    con.execute("ALTER TABLE model_versions ADD COLUMN extra VARCHAR(20)")
    con.commit()
    con.close()
    from mltrain.models import sqlite_registry

    assert sqlite_registry.create_version(home / "mlflow.db", "x", str(model), None, {}, None) is None
    r = run_mltrain("models", "register", "x", "--path", str(model), cwd=project, timeout=300)
    assert r.rc == 0 and "registered x:1" in r.out, r.err


@pytest.mark.slow
def test_fifty_concurrent_registrations_give_versions_one_to_fifty(home, project, tmp_path):
    """50 `mltrain models register` processes started together on one store (on 2 cores they overlap
    for their whole life): versions 1..50, none twice, no gap, and MLflow's client agrees."""
    assert run_mltrain("models", "list", cwd=project).rc == 0  # the store exists, as after any first use
    files = []
    for i in range(CONCURRENT):
        f = tmp_path / f"m{i}" / "model.pt"
        f.parent.mkdir()
        f.write_bytes(f"model {i}".encode())
        files.append(f)
    start = time.perf_counter()
    procs = [subprocess.Popen([*mltrain_exe(), "models", "register", "many", "--path", str(f)], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for f in files]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    seconds = time.perf_counter() - start
    assert all(rc == 0 for rc, _, _ in outs), [err for rc, _, err in outs if rc]
    printed = sorted(int(out.split("many:")[1].split()[0]) for _, out, _ in outs)
    versions = sorted(int(v.version) for v in _client(home).search_model_versions("name = 'many'"))
    duplicates = len(versions) - len(set(versions))
    gaps = len(set(range(1, CONCURRENT + 1)) - set(versions))
    print(f"{CONCURRENT} concurrent registrations: versions {versions[0]}..{versions[-1]}, duplicates "
          f"{duplicates}, gaps {gaps}, {seconds:.1f} s", file=sys.stderr)
    assert printed == versions == list(range(1, CONCURRENT + 1))
    # each version is the file its own process registered
    sources = {int(v.version): Path(v.source).read_text() for v in _client(home).search_model_versions("name = 'many'")}
    assert sorted(sources.values()) == sorted(f"model {i}" for i in range(CONCURRENT))
