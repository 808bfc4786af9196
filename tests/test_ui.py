"""`mltrain ui` (issue 28): MLflow's own UI on mltrain's store, opened in headless chromium through
Playwright as a user would: a HyperDrive sweep, a failed run, a run that registers a model and a pipeline
of two steps, each found with its status, metrics, logs and model. Saves the README's screenshot of the
sweep in MLflow's compare view (docs/ui-sweep-compare.png)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
from support import free_port, mltrain_exe, run_mltrain
from ui_support import chromium, require_ui

pytestmark = pytest.mark.tracking

# The README's picture is rewritten only when asked (MLTRAIN_UPDATE_SCREENSHOT=1), so a test run leaves the
# checkout as it was; otherwise the screenshot goes to the test's own folder.
DOCS_SCREENSHOT = Path(__file__).parent.parent / "docs" / "ui-sweep-compare.png"
SCREENSHOT = DOCS_SCREENSHOT if os.environ.get("MLTRAIN_UPDATE_SCREENSHOT") == "1" else None
PIPELINE = """\
steps:
  prepare:
    overrides: [job=script, job.source_directory=pipeline, job.script=prep.py,
                'job.arguments=[--raw,${inputs.raw},--out,${outputs.data}]']
    params: {scale: 2}
    inputs: {raw: raw}
    outputs: [data]
  side:
    overrides: [job=script, job.source_directory=pipeline, job.script=side.py, 'job.arguments=[--out,${outputs.note}]']
    outputs: [note]
"""
CURVE = ["job=script", "job.script=curve.py", "experiment_name=ui_demo", "run.console=none"]



def record(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def mlflow_id(run_dir: Path) -> str:
    """The MLflow run mltrain's mirror recorded for a run (after `mltrain ui` has synced)."""
    return record(run_dir)["mlflow"]["run_id"]


def started(proc: subprocess.Popen, timeout: float = 180) -> str:
    """The URL `mltrain ui` prints once MLflow's server answers."""
    lines: list = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while True:  # the URL line, or stdout closed (the command ended), or the time is up
        found = next((re.search(r"(http://\S+)", line) for line in list(lines) if "MLflow UI on" in line), None)
        if found or not reader.is_alive() or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert found, f"no URL from `mltrain ui`: {lines}"
    return found.group(1)


def server_pids(port: int) -> list:
    """Processes still serving this port: `mlflow server`, uvicorn and its worker name it in their command."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--port" in cmd and str(port).encode() in cmd and any(b"mlflow" in c or b"uvicorn" in c for c in cmd):
            out.append(int(entry.name))
    return out


def status_of(page, base: str, experiment: str, run_id: str) -> str:
    page.goto(f"{base}/#/experiments/{experiment}/runs/{run_id}")
    page.get_by_text(run_id, exact=True).wait_for()  # "About this run" has loaded
    return re.search(r"\nStatus\n(\w+)", page.inner_text("body")).group(1)


@pytest.mark.slow
def test_mltrain_ui_shows_runs_sweeps_pipelines_logs_and_models_in_a_browser(home, project, tmp_path, monkeypatch):
    require_ui()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    sweep = run_mltrain("-m", *CURVE, "job.arguments=[--curve,$AML_PARAMETER_curve,--pause,0]", "+job.params.curve=a,c",
                        "sweep.primary_metric=score", cwd=project, timeout=240)
    assert sweep.rc == 0, sweep.out + sweep.err
    assert run_mltrain(*CURVE, "job.arguments=[--mode,fail]", "run.id=broken", cwd=project).rc == 1
    reg = run_mltrain("job=script", "job.script=register_model.py", "run.id=reg", "experiment_name=ui_demo", cwd=project,
                      timeout=240)
    assert reg.rc == 0, reg.out + reg.err
    (project / "conf" / "pipeline").mkdir(parents=True)
    (project / "conf" / "pipeline" / "tiny.yaml").write_text(PIPELINE)
    (project / "raw").mkdir()
    (project / "raw" / "a.txt").write_text("1 2 3\n")
    pipe = run_mltrain("pipeline=tiny", cwd=project, timeout=240)
    assert pipe.rc == 0, pipe.out + pipe.err

    port = free_port()
    ui = subprocess.Popen([*mltrain_exe(), "ui", "--port", str(port)], cwd=project, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        base = started(ui)
        assert base == f"http://127.0.0.1:{port}"
        # A second server on the same port: one line, and the first one keeps serving.
        again = run_mltrain("ui", "--port", str(port), cwd=project)
        assert again.rc != 0 and again.err == f"mltrain: error: port {port} on 127.0.0.1 is taken (another `mltrain ui`?); " \
                                               "pick another with --port\n", again.err
        _look_in_the_browser(base, home, tmp_path)
    finally:
        if ui.poll() is None:
            ui.send_signal(signal.SIGINT)  # what Ctrl-C sends
        rc = ui.wait(timeout=60)
    assert rc == 0, ui.stderr.read()
    assert server_pids(port) == [], "Ctrl-C left MLflow's server running"
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # the browser's closed connections linger
        s.bind(("127.0.0.1", port))  # nothing listens there any more


@pytest.mark.parametrize("args,message", [
    (["--port", "x"], "argument --port: invalid int value: 'x'"),
    (["--port", "70000"], "--port 70000: a port is 1 to 65535"),
    (["--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line(home, project, args, message):
    r = run_mltrain("ui", *args, cwd=project)
    assert r.rc == 2 and r.err == f"mltrain: error: {message}\n", r.err
    assert not (home / "mlflow.db").exists()  # nothing was synced or started


def _look_in_the_browser(base: str, home: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a shared 2-core machine draws the UI slowly; a hang still fails

    runs = home / "runs"
    sweep_json = json.loads(next((runs / "_sweeps").glob("*/sweep.json")).read_text())
    members = {m["params"]["+job.params.curve"]: Path(m["run_dir"]) for m in sweep_json["members"]}
    pipeline = next(d for d in runs.iterdir() if (d / "run.json").is_file() and record(d).get("pipeline"))
    steps = {name: Path(info["run_dir"]) for name, info in record(pipeline)["pipeline"]["steps"].items()}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(base)
        page.get_by_text("Model training", exact=True).click()  # MLflow 3 opens on its GenAI views
        page.goto(f"{base}/#/experiments")
        for name in ("ui_demo", "tiny"):  # experiments named as in mltrain
            expect(page.get_by_role("link", name=name, exact=True)).to_be_visible()
        page.get_by_role("link", name="ui_demo", exact=True).click()

        # The run list: the lone runs and the sweep; its members appear under it once it is expanded.
        grid = page.locator(".ag-row")
        for name in ("reg", "broken"):
            expect(grid.filter(has_text=name).first).to_be_visible()
        sweep_row = grid.filter(has_text=re.compile(r"sweep \d")).first
        expect(sweep_row).to_be_visible()
        parent = sweep_row.get_by_role("link").first.get_attribute("href").rsplit("/", 1)[-1]
        names = [members["a"].name, members["c"].name]
        expect(page.get_by_role("link", name=names[0])).to_have_count(0)
        sweep_row.get_by_role("button").first.click()
        for name in names:
            expect(page.get_by_role("link", name=name)).to_be_visible()
        order = [r.inner_text() for r in grid.all()]
        at = next(i for i, text in enumerate(order) if "sweep " in text)
        assert {i for i, text in enumerate(order) if any(n in text for n in names)} == {at + 1, at + 2}, order

        # Every run's status, as MLflow shows it on the run's page; the sweep's parent has ended too.
        experiment = re.search(r"#/experiments/(\d+)", page.url).group(1)
        expected = {mlflow_id(members["a"]): "Finished", mlflow_id(members["c"]): "Finished", parent: "Finished",
                    mlflow_id(runs / "broken"): "Failed", mlflow_id(runs / "reg"): "Finished"}
        shown = {run_id: status_of(page, base, experiment, run_id) for run_id in expected}
        assert shown == expected
        page.goto(f"{base}/#/experiments/{experiment}/runs/{parent}")  # the sweep's best value and parameters
        expect(page.get_by_text("best.job.params.curve")).to_be_visible()
        expect(page.get_by_text("best_score")).to_be_visible()
        assert re.search(r"best_score\n6\n", page.inner_text("body"))
        # The pipeline: its own experiment, a parent run that has ended, its steps as that run's children.
        page.goto(f"{base}/#/experiments")
        link = page.get_by_role("link", name="tiny", exact=True).first.get_attribute("href")
        pipe_experiment = re.search(r"#/experiments/(\d+)", link).group(1)
        for step, run_dir in steps.items():
            assert status_of(page, base, pipe_experiment, mlflow_id(run_dir)) == "Finished"
            expect(page.get_by_text(step, exact=True).first).to_be_visible()  # a step's run is named after it
            # the parent's name is fetched after the run's own fields
            expect(page.get_by_role("link", name="pipeline tiny", exact=True)).to_be_visible()
        assert status_of(page, base, pipe_experiment, mlflow_id(pipeline)) == "Finished"

        # A metric chart with the points logged: curve a is 6 values of `score`, steps 1 to 6.
        page.goto(f"{base}/#/experiments/{experiment}/runs/{mlflow_id(members['a'])}/model-metrics")
        chart = page.locator(".js-plotly-plot").first
        expect(chart).to_be_visible()
        expect(chart.locator("path.point")).to_have_count(6)
        assert "Step" in chart.inner_text()

        # System metrics: MLflow's own tab charts what the run's sampler recorded under MLflow's system/ names.
        page.goto(f"{base}/#/experiments/{experiment}/runs/{mlflow_id(members['a'])}/system-metrics")
        expect(page.get_by_text("cpu_utilization_percentage").first).to_be_visible()
        expect(page.get_by_text("system_memory_usage_megabytes").first).to_be_visible()

        # Rank 0's log, readable as an artifact.
        page.goto(f"{base}/#/experiments/{experiment}/runs/{mlflow_id(members['a'])}/artifacts")
        page.get_by_text("logs", exact=True).click()
        page.get_by_text("rank_0.log", exact=True).click()
        expect(page.get_by_text("logged 6 values")).to_be_visible()

        # The registered model, its version and the run that made it.
        page.goto(f"{base}/#/models/seed001/versions/1")
        expect(page.get_by_text("Version 1").first).to_be_visible()
        assert re.search(r"Source Run\n:\nreg", page.inner_text("body"))

        # The README's picture: the sweep's members side by side in MLflow's compare view.
        ids = json.dumps([mlflow_id(members["a"]), mlflow_id(members["c"])])
        page.goto(f"{base}/#/compare-runs?runs={ids}&experiments={json.dumps([experiment])}")
        expect(page.get_by_text("Parallel Coordinates Plot")).to_be_visible()
        close = page.locator("button[aria-label='Close']")  # MLflow's assistant panel, beside the plot
        if close.count():
            close.first.click()
        page.wait_for_timeout(1500)  # the plot draws after the page reports ready
        shot = SCREENSHOT or tmp_path / "ui-sweep-compare.png"
        page.screenshot(path=str(shot))
        browser.close()
    assert shot.stat().st_size > 10_000
    assert os.access(shot, os.R_OK)
