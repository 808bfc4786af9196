"""The trials of a sweep whose command pip-installs the same packages share one package layer (issue 54:
Azure's pipeline sweep 1c, `pip install 'mlflow<2.19' && python train.py`, installed MLflow and pyarrow
into a fresh layer for each of its 20 trials, seconds of CPU each that a user's own loop pays once).
Structural, read from the trials' logs and folders: the package is installed by one trial, found installed
by the others, which run at the same time (the layer's pip takes a lock); each trial keeps its own MLflow
note, and trials that log through an MLflow of their own from that layer (1c's `mlflow<2.19`) log to
their own runs. A pip call with a trial's own parameter in it keeps a layer per trial."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from support import metric_rows, run_mltrain

pytestmark = pytest.mark.slow


def _wheel(folder: Path) -> str:
    """A tiny wheel, written by hand (no network, no build step)."""
    name = "sweep_layer_probe-0.1-py3-none-any.whl"
    info = "sweep_layer_probe-0.1.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as whl:
        whl.writestr("sweep_layer_probe.py", "WHERE = __file__\n")
        whl.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: sweep-layer-probe\nVersion: 0.1\n")
        whl.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        whl.writestr(f"{info}/RECORD", "")
    return name


def _sweep(home: Path, project: Path, pip: str, script: str = "") -> list:
    wheel = _wheel(project / "src")
    run = script or """python -c "import sweep_layer_probe; print('probe at', sweep_layer_probe.WHERE)\""""
    (project / "sweep.yml").write_text(textwrap.dedent(f"""\
        $schema: https://azuremlschemas.azureedge.net/latest/sweepJob.schema.json
        type: sweep
        trial:
          code: src
          command: >-
            {pip.format(wheel=wheel)} &&
            {run} --x ${{{{search_space.x}}}}
        sampling_algorithm: grid
        search_space:
          x:
            type: choice
            values: [1, 2, 3]
        objective:
          goal: maximize
          primary_metric: score
        limits:
          max_total_trials: 3
          max_concurrent_trials: 3
        """))
    r = run_mltrain("job", "create", "--file", "sweep.yml", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    sweep = next((home / "runs" / "_sweeps").glob("*/sweep.json"), None)
    doc = json.loads(sweep.read_text()) if sweep else None
    runs = [Path(m["run_dir"]) for m in doc["members"]] if doc else []
    assert len(runs) == 3
    return runs


def _log(run: Path) -> str:
    return (run / "logs" / "rank_0.log").read_text()


def test_trials_share_one_package_layer_installed_once(home, project):
    runs = _sweep(home, project, "pip install --no-deps --no-index {wheel}")
    assert all(json.loads((r / "run.json").read_text())["status"] == "Completed" for r in runs)
    logs = [_log(r) for r in runs]
    where = {line.split("probe at ", 1)[1].split("/lib/")[0] for log in logs for line in log.splitlines()
             if line.startswith("probe at ")}
    assert len(where) == 1, logs  # one layer for the three trials
    layer = Path(where.pop())
    assert layer.parent.name == "pip-layers" and not any((r / "pip-layer").exists() for r in runs)
    assert sum("Successfully installed sweep-layer-probe" in log for log in logs) == 1, logs
    assert sum("already installed with the same version" in log for log in logs) == 2, logs
    for r in runs:  # each trial's own MLflow note (its database, its file store), never another trial's
        note = json.loads((r / "pip-layer.json").read_text())
        assert note["layer"] == str(layer)
        assert note.get("tracking_uri") in (None, f"sqlite:///{r / 'mlflow.db'}")
        assert note["file_store"].startswith(str(r))


def test_a_pip_call_with_a_trial_parameter_keeps_a_layer_per_trial(home, project):
    runs = _sweep(home, project, "pip install --no-deps --no-index {wheel} --retries ${{{{search_space.x}}}}")
    for r in runs:
        assert f"probe at {r}/pip-layer/" in _log(r)
        assert "Successfully installed sweep-layer-probe" in _log(r)


@pytest.mark.network
@pytest.mark.tracking  # the trials' mlflow.log_metric reaches their runs through the MLflow mirror
def test_trials_with_their_own_mlflow_in_a_shared_layer_log_to_their_own_runs(home, project):
    found = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "mlflow"], capture_output=True,
                           text=True, timeout=60)
    if found.returncode != 0 or " 2.18.0," not in found.stdout:
        pytest.skip("pip's index does not serve mlflow 2.18.0 here (no network?)")
    (project / "src").mkdir(exist_ok=True)
    (project / "src" / "log.py").write_text("import sys, mlflow\nmlflow.log_metric('score', float(sys.argv[-1]))\n")
    runs = _sweep(home, project, "pip install -q 'mlflow<2.19'", script="python log.py")
    scores = [[m["value"] for m in metric_rows(str(r)) if m["name"] == "score"] for r in runs]
    assert sorted(scores) == [[1.0], [2.0], [3.0]], [_log(r) for r in runs]  # each its own, none another's
    assert json.loads(next((home / "runs" / "_sweeps").glob("*/sweep.json")).read_text())["best_value"] == 3
