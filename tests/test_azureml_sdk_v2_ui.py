"""Jobs submitted with Azure ML's v2 Python SDK show in `mltrain ui` as they do in Azure's studio: the
entity's `studio_url` (the "Web View" line `jobs.stream` prints) opens, in a real browser, MLflow's page
of that run on mltrain's store, with the run's status. The scripts
are test_azureml_sdk_v2.py's, run unmodified with MLTRAIN_AZUREML=1 and MLTRAIN_UI_URL naming the UI."""
from __future__ import annotations

import re
import signal
import subprocess

import pytest
from support import free_port, mltrain_exe
from test_azureml_sdk_v2 import check_ddp, check_pipeline, run_script, sdk_project
from test_azureml_v2 import write
from test_ui import started
from ui_support import chromium, require_ui

pytest.importorskip("azure.ai.ml", reason="the azure extra: pip install 'mltrain[azure]'")
pytestmark = [pytest.mark.slow, pytest.mark.tracking]

URLS = """\
import sys
from azure.ai.ml import MLClient
jobs = MLClient.from_config(None).jobs
for name in sys.argv[1:]:
    print("URL", name, jobs.get(name).studio_url)
"""


def test_sdk_jobs_open_from_their_studio_url_in_mltrain_ui(home, project, tmp_path, monkeypatch):
    require_ui()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("MLTRAIN_UI_URL", base)  # read by the SDK scripts' processes (run_script passes os.environ)
    sdk_project(project)
    command = check_ddp(home, project)["id"]
    steps = check_pipeline(home, project)
    pipeline = next(iter(steps.values()))["id"].rsplit(".", 1)[0]
    write(project, "urls.py", URLS)
    got = run_script(project, "urls.py", command, pipeline, timeout=120)
    assert got.returncode == 0, got.stdout + got.stderr
    urls = {line.split()[1]: line.split()[2] for line in got.stdout.splitlines() if line.startswith("URL ")}
    # An ended job's page is its MLflow run's own (the mirror copied it before the script returned).
    for name in (command, pipeline):
        assert re.fullmatch(re.escape(base) + r"/#/runs/[0-9a-f]{32}", urls[name]), urls

    ui = subprocess.Popen([*mltrain_exe(), "ui", "--port", str(port)], cwd=project, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert started(ui) == base
        _look(urls[command], command)
        _look(urls[pipeline], pipeline)
    finally:
        if ui.poll() is None:
            ui.send_signal(signal.SIGINT)
        ui.wait(timeout=60)
    # The "Web View" line jobs.stream printed named the same UI.
    p = run_script(project, "ddp_job.py")
    assert p.returncode == 0 and f"\nWeb View: {base}/#/" in p.stdout, p.stdout + p.stderr


def _look(url: str, name: str) -> None:
    """The run's page at `url`: MLflow's run page of the job `name`, Finished."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=60_000)  # a shared 2-core machine draws the UI slowly; a hang still fails
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(url)
        expect(page.get_by_text("Status", exact=True).first).to_be_visible()
        expect(page.get_by_text(name).first).to_be_visible()  # the job's name (a pipeline's run is "pipeline X")
        body = page.inner_text("body")
        assert re.search(r"\nStatus\nFinished\n", body) and f"mltrain.run_id\n: {name}\n" in body, body[:3000]
        assert "/experiments/" in page.url and "/runs/" in page.url, page.url  # MLflow placed it in its experiment
        browser.close()
