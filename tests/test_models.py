"""The model registry (issue 12) on the real embedded SQLite store: registration from inside a job,
the CLI, concurrency, MLflow's own client reading mltrain's store, and every bad input as one line."""
from __future__ import annotations

import json
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import mltrain_exe, only_run, run_mltrain


def one_line_error(r, text: str) -> None:
    lines = r.err.strip().splitlines()
    assert r.rc == 2 and len(lines) == 1 and lines[0].startswith("mltrain: error: ") and text in lines[0], r.err


def test_a_job_registers_its_model_and_the_cli_returns_its_files(home, project, tmp_path):
    r = run_mltrain("job=script", "job.script=register_model.py", cwd=project, timeout=120)
    assert r.rc == 0, r.out + r.err
    assert "registered seed001 version 1 framework PyTorch" in r.out
    run = only_run(home)
    shown = json.loads(run_mltrain("models", "show", "seed001", "--json", cwd=project).out)
    assert shown["version"] == 1 and shown["run_id"] == run["id"] and shown["tags"] == {"area": "digits"}
    assert shown["properties"] == {"accuracy": "0.93"} and shown["description"] == "from inside the job"
    # the version keeps its own copy: the run may be deleted
    original = (Path(run["dir"]) / "outputs" / "model.pt").read_bytes()
    shutil.rmtree(run["dir"])
    target = tmp_path / "dl"
    d = run_mltrain("models", "download", "seed001:1", str(target), cwd=project)
    assert d.rc == 0, d.err
    assert (target / "model.pt").read_bytes() == original
    one_line_error(run_mltrain("models", "download", "seed001", str(target), cwd=project), "already exists")
    assert run_mltrain("models", "download", "seed001", str(target), "--exist-ok", cwd=project).rc == 0
    # MLflow's own client reads mltrain's store
    from mlflow import MlflowClient

    uri = f"sqlite:///{home / 'mlflow.db'}"
    versions = MlflowClient(tracking_uri=uri, registry_uri=uri).search_model_versions("name = 'seed001'")
    assert [int(v.version) for v in versions] == [1] and versions[0].tags["mltrain.run_id"] == run["id"]


@pytest.mark.slow
def test_twenty_concurrent_registrations_lose_no_version(home, project, tmp_path):
    """Separate processes starting together on a store that does not exist yet: the schema is created
    once, and the 20 versions are 1..20."""
    files = []
    for i in range(20):
        f = tmp_path / f"m{i}" / "model.pt"
        f.parent.mkdir()
        f.write_bytes(f"model {i}".encode())
        files.append(f)

    def register(f: Path):
        return subprocess.run([*mltrain_exe(), "models", "register", "many", "--path", str(f)], cwd=project,
                              capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=20) as pool:
        done = list(pool.map(register, files))
    assert all(d.returncode == 0 for d in done), [d.stderr for d in done if d.returncode]
    listed = json.loads(run_mltrain("models", "list", "many", "--json", cwd=project).out)
    assert sorted(m["version"] for m in listed) == list(range(1, 21))
    by_version = {m["version"]: Path(m["source"]) for m in listed}  # a registered file is its own source
    assert sorted(p.read_text() for p in by_version.values()) == sorted(f"model {i}" for i in range(20))


def test_versions_tags_and_properties_follow_azure(home, project, tmp_path):
    f = tmp_path / "model.onnx"
    f.write_bytes(b"onnx bytes")
    for _ in range(3):
        assert run_mltrain("models", "register", "m", "--path", str(f), "--property", "owner=me", cwd=project).rc == 0
    from mltrain.models.registry import Model

    latest = Model("m")
    assert latest.version == 3 and latest.framework == "ONNX"
    latest.add_tags({"stage": "prod"})
    assert Model("m", version=3).tags == {"stage": "prod"}
    assert [m.version for m in Model.list("m", tags=["stage=prod"])] == [3]
    assert Model.list("m", tags=["stage=dev"]) == []
    latest.add_properties({"owner": "me", "new": "x"})  # adding is fine, the same value is fine
    with pytest.raises(Exception, match="properties cannot change"):
        latest.add_properties({"owner": "you"})
    # two registrations of the same bytes share one copy
    assert Model("m", 1).source == Model("m", 2).source


def test_bad_registry_input_is_one_line(home, project, tmp_path):
    f = tmp_path / "w.pt"
    f.write_bytes(b"x")
    assert run_mltrain("models", "register", "digits", "--path", str(f), cwd=project).rc == 0
    one_line_error(run_mltrain("models", "show", "digitz", cwd=project), "no model 'digitz' in the registry (closest: digits)")
    one_line_error(run_mltrain("models", "show", "digits:7", cwd=project), "model 'digits' has no version 7 (versions: 1..1)")
    one_line_error(run_mltrain("models", "show", "digits:x", cwd=project), "a version is a whole number")
    one_line_error(run_mltrain("models", "register", "d", "--path", "nope.pt", cwd=project),
                   "model_path 'nope.pt' does not exist")
    r = run_mltrain("job=command", "job.command=true", cwd=project)
    assert r.rc == 0
    one_line_error(run_mltrain("models", "register", "d", "--run", only_run(home)["id"], "--path", "outputs/model.pt",
                               cwd=project), "model_path 'outputs/model.pt' does not exist in run")
    one_line_error(run_mltrain("models", "register", "bad name", "--path", str(f), cwd=project), "model name 'bad name'")
    # --json (what the v1 stand-in's Run.register_model reads inside a job): the version, or the refusal, as data
    made = run_mltrain("models", "register", "digits", "--path", str(f), "--json", cwd=project)
    assert made.rc == 0 and json.loads(made.out)["version"] == 2 and json.loads(made.out)["name"] == "digits"
    refused = run_mltrain("models", "register", "d", "--path", "nope.pt", "--json", cwd=project)
    assert refused.rc == 2 and "model_path 'nope.pt' does not exist" in json.loads(refused.out)["error"]
