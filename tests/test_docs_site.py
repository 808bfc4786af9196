"""The documentation site (mkdocs.yml, docs/): built with `mkdocs build --strict` as a reader would build
it, so a broken link, a missing anchor or a page left out of the navigation fails the tests; its
reference pages are generated from the code (docs/hooks.py), so a changed default changes the page; and
every concept page is at most two clicks from the home page."""
from __future__ import annotations

import dataclasses
import importlib.util
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest
import yaml
from support import ci

ROOT = Path(__file__).resolve().parent.parent


def _mkdocs_problem() -> str | None:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        return "MkDocs and its Material theme are not installed (pip install '.[docs]'; scripts/setup.sh does)"
    return None


def _require_mkdocs() -> None:
    problem = _mkdocs_problem()
    if problem:
        if ci():
            pytest.fail(problem)
        pytest.skip(problem)


def _build(config: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    _require_mkdocs()
    out = tmp_path_factory.mktemp("site")
    proc = _build(ROOT / "mkdocs.yml", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def nav_pages() -> list[str]:
    pages: list[str] = []

    def walk(node):
        if isinstance(node, str):
            pages.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    return pages


def _html(site: Path, page: str) -> Path:
    """Where MkDocs writes a page (use_directory_urls: concepts/slurm.md -> concepts/slurm/index.html)."""
    stem = page[:-3]
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def test_the_site_builds_strict_with_every_page(site):
    for page in nav_pages():
        assert _html(site, page).is_file(), f"{page} was not built"
    assert (site / "search" / "search_index.json").is_file(), "the search index"
    reference = _html(site, "reference/config.md").read_text()
    for key in ("trainer.epochs", "compute.partition", "distribution.process_count_per_node", "job.script",
                "sweep.early_termination.policy", "pipeline.steps.&lt;name&gt;.inputs", "hydra.launcher.max_requeues"):
        assert key in reference, f"{key} is missing from the generated reference"
    commands = _html(site, "reference/cli.md").read_text()
    for command in ("mltrain runs resume", "mltrain models register", "mltrain env save", "mltrain job",
                    "mltrain ui", "--dry-run"):
        assert command in commands, f"{command} is missing from the commands reference"
    python = _html(site, "reference/python.md").read_text()
    for name in ("mltrain.submit", "Run.wait", "Run.cancel", "mltrain.Model", "mltrain.run.log", "RunFailed"):
        assert name in python, f"{name} is missing from the Python API reference"


def test_a_broken_link_or_anchor_fails_the_build(tmp_path):
    """The check is real: the same site with one link to a missing page and one to a missing section
    does not build."""
    _require_mkdocs()
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a") as f:
        f.write("\n[gone](concepts/no-such-page.md) and [moved](concepts/slurm.md#no-such-section)\n")
    proc = _build(tmp_path / "mkdocs.yml", tmp_path / "site")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "no-such-page.md" in out and "no-such-section" in out, out


def _hooks():
    spec = importlib.util.spec_from_file_location("mltrain_docs_hooks", ROOT / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_changed_default_changes_the_reference(monkeypatch):
    """The page is the schema: change a default in the dataclass and the page says so."""
    from mltrain.jobspec.job_schemas import TrainerConf

    hooks = _hooks()
    assert "| `trainer.epochs` | `int` | `5` | &gt; 0 |" in hooks.config_reference()
    epochs = next(f for f in dataclasses.fields(TrainerConf) if f.name == "epochs")
    monkeypatch.setattr(epochs, "default", 7)
    assert "| `trainer.epochs` | `int` | `7` | &gt; 0 |" in hooks.config_reference()


class _Links(HTMLParser):
    """The links of a page's own text (its <article>), not of the navigation every page repeats."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.depth = 0  # inside <article> while > 0

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.depth += 1
        href = dict(attrs).get("href")
        if tag == "a" and href and self.depth:
            self.hrefs.append(href)

    def handle_endtag(self, tag):
        if tag == "article":
            self.depth -= 1


def _links(site: Path, html: Path) -> set[Path]:
    """The site's pages one click away from `html`, through its text."""
    parser = _Links()
    parser.feed(html.read_text())
    base = "file://" + str(html)
    out = set()
    for href in parser.hrefs:
        url = urlparse(urljoin(base, href))
        if url.scheme != "file":
            continue
        target = Path(url.path)
        target = target / "index.html" if not target.suffix else target
        if target.is_file() and site in target.parents:
            out.add(target.resolve())
    return out


def test_every_concept_page_is_two_clicks_from_home(site):
    """A newcomer's question is answered within two clicks of the home page, by the links of the pages'
    own text (the navigation aside): the home page's, then those of each page it links to."""
    home = (site / "index.html").resolve()
    one = _links(site, home)
    two = set(one)
    for page in one:
        two |= _links(site, page)
    pages = [p for p in nav_pages() if p.startswith(("concepts/", "migration/", "reference/"))
             or p in ("getting-started.md", "azureml-v1-sdk.md", "azureml-v2-sdk.md", "faults.md", "benchmarks.md", "architecture.md")]
    assert len(pages) >= 20
    far = [p for p in pages if _html(site, p).resolve() not in two]
    assert not far, f"more than two clicks from the home page: {far}"
    near = [p for p in pages if p.startswith("concepts/") and _html(site, p).resolve() not in one]
    assert not near, f"concept pages the home page does not link: {near}"


# The README's picture of the site is rewritten only when asked (MLTRAIN_UPDATE_SCREENSHOT=1), as
# tests/test_ui.py does with its own; otherwise the screenshots go to the test's own folder.
DOCS_SCREENSHOT = ROOT / "docs" / "site-home.png"


@pytest.mark.ui
def test_the_site_in_a_browser(site, tmp_path):
    """As a reader sees it, in headless chromium: the home page, a concept page and the generated reference
    render with the navigation, and the search finds a key; a screenshot of each is saved."""
    import functools
    import http.server
    import threading

    from support import require
    from ui_support import chromium

    problem = None if importlib.util.find_spec("playwright") else "no Playwright for Python: pip install '.[test]'"
    problem = problem or (None if chromium() else "no chromium: apt-get install chromium (scripts/test.sh does as root)")
    require(problem, "MLTRAIN_REQUIRE_UI", "the documentation site in a browser")
    from playwright.sync_api import expect, sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"

    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/")
            expect(page.locator("h1").first).to_contain_text("mltrain")
            nav = page.locator("nav.md-nav--primary")
            expect(nav.get_by_role("link", name="Getting started", exact=True)).to_be_attached()
            expect(page.get_by_role("link", name="Slurm", exact=True).first).to_be_attached()
            page.screenshot(path=str(tmp_path / "site-home.png"), full_page=False)
            if os.environ.get("MLTRAIN_UPDATE_SCREENSHOT") == "1":
                page.screenshot(path=str(DOCS_SCREENSHOT), full_page=False)

            # follow the home page's link to a concept page, as a reader would
            page.get_by_role("link", name="Slurm", exact=True).last.click()
            expect(page.locator("h1").first).to_contain_text("Slurm")
            expect(page.locator("pre").first).to_be_visible()  # its commands
            page.screenshot(path=str(tmp_path / "site-concept.png"))

            page.goto(f"{base}/reference/config/")
            expect(page.locator("h1").first).to_contain_text("Config groups and keys")
            expect(page.get_by_text("trainer.epochs", exact=True).first).to_be_visible()
            page.screenshot(path=str(tmp_path / "site-reference.png"))

            # the search: Material's own box, its index built by the search plugin
            search = page.locator("input.md-search__input")
            search.click()
            search.press_sequentially("requeue", delay=50)  # keystrokes, as Material listens for them
            expect(page.locator(".md-search-result__item").first).to_be_visible(timeout=60_000)
            assert "requeue" in page.locator(".md-search-result").inner_text().lower()
            page.screenshot(path=str(tmp_path / "site-search.png"))
            browser.close()
    finally:
        server.shutdown()
    for name in ("site-home.png", "site-concept.png", "site-reference.png"):
        assert (tmp_path / name).stat().st_size > 10_000, name
