"""A backend is one package and its table lines (issue 33): a backend defined only in this test, installed
the way a package of its own would be (entry points `mltrain.backends` and `mltrain.computes`, here a
dist-info folder on PYTHONPATH), runs a job, a sweep and a pipeline step with real processes. It is the
local backend under another name with a compute key of its own, which it hands to every rank."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import run_mltrain, runs

BACKEND = '''\
from dataclasses import dataclass

from mltrain.backends.local.backend import LocalBackend
from mltrain.jobspec.local_compute import LocalComputeConf


@dataclass
class PocketComputeConf(LocalComputeConf):
    kind: str = "pocket"
    label: str = "default-label"


class PocketBackend(LocalBackend):
    name = "pocket"

    def wrap_ranks(self, compute, environment, run_dir):
        prefix, env = super().wrap_ranks(compute, environment, run_dir)
        return prefix, {**env, "POCKET_LABEL": compute.label}
'''

ENTRY_POINTS = """\
[mltrain.backends]
pocket = pocket_backend:PocketBackend

[mltrain.computes]
pocket = pocket_backend:PocketComputeConf
"""

COMMAND = 'job.command="echo label=$POCKET_LABEL"'


@pytest.fixture
def pocket(tmp_path, project, monkeypatch) -> Path:
    plugins = tmp_path / "plugins"
    info = plugins / "pocket_backend-0.1.dist-info"
    info.mkdir(parents=True)
    (plugins / "pocket_backend.py").write_text(BACKEND)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pocket-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.setenv("PYTHONPATH", str(plugins))
    compute = project / ".mltrain" / "compute"
    compute.mkdir(parents=True, exist_ok=True)
    (compute / "pocket.yaml").write_text("defaults: [pocket_schema, _self_]\nlabel: from-yaml\n")
    return project


def _log(run: dict) -> str:
    return (Path(run["dir"]) / "logs" / "rank_0.log").read_text()


def test_a_backend_from_another_package_runs_a_job(home, pocket):
    r = run_mltrain("job=command", COMMAND, "compute=pocket", cwd=pocket)
    assert r.rc == 0, r.err
    (run,) = runs(home)
    assert run["status"] == "Completed" and run["backend"] == "pocket" and run["compute"] == "pocket"
    assert "label=from-yaml" in _log(run)
    job = json.loads((Path(run["dir"]) / "job.json").read_text())
    assert job["compute"] == {"kind": "pocket", "max_concurrent_jobs": 1, "gpus": None, "gpus_per_task": None,
                              "label": "from-yaml"}
    status = run_mltrain("runs", "status", run["id"], cwd=pocket)
    assert status.rc == 0 and "Completed" in status.out, status.err


def test_a_backend_from_another_package_runs_a_sweep(home, pocket):
    r = run_mltrain("-m", "job=command", 'job.command="echo label=$POCKET_LABEL i=${job.params.i}"', "compute=pocket",
                    "compute.label=swept", "compute.max_concurrent_jobs=2", "+job.params.i=1,2,3", cwd=pocket)
    assert r.rc == 0, r.err
    members = runs(home)
    assert len(members) == 3 and {m["backend"] for m in members} == {"pocket"}
    assert sorted(_log(m).strip() for m in members) == ["label=swept i=1", "label=swept i=2", "label=swept i=3"]


def test_a_backend_from_another_package_runs_a_pipeline_step(home, pocket):
    (pocket / "conf" / "pipeline").mkdir(parents=True, exist_ok=True)
    (pocket / "conf" / "pipeline" / "pocket.yaml").write_text(
        "steps:\n"
        "  here:\n    overrides: [job=command, 'job.command=\"echo here\"']\n"
        "  pocketed:\n    overrides: [job=command, compute=pocket, compute.label=step, "
        "'job.command=\"echo label=$POCKET_LABEL\"']\n")
    r = run_mltrain("pipeline=pocket", cwd=pocket, timeout=180)
    assert r.rc == 0, r.err
    steps = {Path(s["dir"]).name.rsplit(".", 1)[-1]: s for s in runs(home) if not s.get("pipeline")}
    assert steps["pocketed"]["backend"] == "pocket" and steps["here"]["backend"] == "local"
    assert "label=step" in _log(steps["pocketed"]) and "here" in _log(steps["here"])


def test_a_misspelt_key_or_kind_of_a_packaged_backend_gets_one_line(home, pocket):
    r = run_mltrain("job=command", "job.command=true", "compute=pocket", "compute.lable=x", cwd=pocket)
    assert r.rc == 2 and r.err.strip().splitlines() == [
        "mltrain: error: compute.lable: unknown key (allowed keys: kind, max_concurrent_jobs, gpus, gpus_per_task, label)"]
    r = run_mltrain("job=command", "job.command=true", "compute.kind=pockt", cwd=pocket)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1 and "pocket" in r.err and "slurm" in r.err, r.err
    r = run_mltrain("job=command", "job.command=true", "compute=pocket", cwd=pocket, env={"PYTHONPATH": ""})
    assert r.rc == 2 and r.err.strip().splitlines() == [
        "mltrain: error: compute: 'pocket' is a compute kind no installed package provides (known: local, slurm); "
        "install the backend's package"]
    assert runs(home) == []
