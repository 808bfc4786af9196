"""Fixtures: every test gets its own MLTRAIN_HOME, a copy of the test scripts as its project, and
(unless marked `gpu`) no visible GPU. Helpers live in support.py."""
from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import SCRIPTS

#: Seconds a unit test may take (tests/unit: no processes, no cluster); other tests take pyproject's
#: `timeout`, so a hang fails one test instead of spending CI's whole budget.
UNIT_TIMEOUT_S = 30
#: What a test needs, marked from the helpers it (or a fixture it uses) calls: `-m "not slurm"` on a
#: laptop, `-m mpi` to run only the MPI tests.
NEEDS = {"require_cluster": "slurm", "require_mpi": "mpi", "require_horovod": "horovod", "require_ui": "ui"}


_SOURCE: dict = {}  # a function's source, read once: collection asked inspect for each test's fixtures again


def _source(fn) -> str:
    if fn not in _SOURCE:
        try:
            _SOURCE[fn] = inspect.getsource(fn)
        except (OSError, TypeError):
            _SOURCE[fn] = ""
    return _SOURCE[fn]


def _sources(item) -> str:
    return "\n".join(_source(fn) for fn in [getattr(item, "function", None)] + [
        d.func for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs])


#: Tests measured slow in the quick loop (`-m "not slow"`), besides those marked in their module: written by
#: scripts/slow_tests.py from a `--durations=0` run, so the quick loop stays about two minutes (issue 50).
SLOW = {line.strip() for line in (Path(__file__).parent / "slow_tests.txt").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")}


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group marks set here (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("[")[0] in SLOW:
            item.add_marker(pytest.mark.slow)
        if "unit" in Path(str(item.fspath)).parts:
            if item.get_closest_marker("timeout") is None:  # a unit test that says its own, with why, keeps it
                item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))
            continue
        text = _sources(item)
        for helper, marker in NEEDS.items():
            if helper in text:
                item.add_marker(getattr(pytest.mark, marker))
        if "horovod" in [m.name for m in item.iter_markers()]:
            item.add_marker(pytest.mark.mpi)
        # Under pytest-xdist (scripts/test.sh: -n 2 --dist loadgroup) every test that uses the test Slurm
        # clusters runs on one worker, one after another: some reconfigure or restart the cluster.
        if "slurm" in [m.name for m in item.iter_markers()] or "cluster_problem" in text:
            item.add_marker(pytest.mark.xdist_group("slurm"))


@pytest.fixture(autouse=True)
def _fresh_mlflow_stores():
    """pytest 8 hands a test the tmp_path of the test before it when that one passed (its folder is removed
    at once: tmp_path_retention_policy = "failed"), and MLflow keeps one SQLAlchemy engine per store URI
    for the whole process: a test's MlflowClient on its store would read it through the engine of the
    removed file at the same path ("Run ... not found"). Each test's stores start with no engine."""
    yield
    for name in ("mlflow.tracking._tracking_service.registry", "mlflow.tracking._model_registry.registry"):
        module = sys.modules.get(name)  # the stores built per URI
        if module is not None:
            for kind in vars(module).values():
                cached = getattr(kind, "_get_store_with_resolved_uri", None)
                if isinstance(kind, type) and hasattr(cached, "cache_clear"):
                    cached.cache_clear()
    for name in ("mlflow.store.tracking.sqlalchemy_store", "mlflow.store.model_registry.sqlalchemy_store"):
        module = sys.modules.get(name)  # never imports MLflow for a test that did not
        if module is None:
            continue
        store = module.SqlAlchemyStore
        with store._engine_map_lock:
            engines = list(store._engine_map.values())
            store._engine_map.clear()
        for engine in engines:
            engine.dispose()


@pytest.fixture(autouse=True)
def _no_gpu_unless_marked(request, monkeypatch):
    """Tests are written for the CPU: on a GPU machine they would otherwise pick nccl, CUDA and
    other defaults. Only tests marked `gpu` see the machine's GPUs."""
    if request.node.get_closest_marker("gpu") is None:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture(autouse=True)
def _no_mlflow_mirror_unless_marked(request, monkeypatch):
    """The MLflow mirror runs in the background after every command; tests of other things would
    each start one (and race with their temporary folder's removal). Tests marked `tracking` keep it."""
    if request.node.get_closest_marker("tracking") is None:
        monkeypatch.setenv("MLTRAIN_TRACKING", "off")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("MLTRAIN_HOME", str(h))
    return h


@pytest.fixture
def project(tmp_path) -> Path:
    """A user project folder holding the test scripts, as a user would point job.source_directory at."""
    p = tmp_path / "proj"
    shutil.copytree(SCRIPTS, p)
    return p


@pytest.fixture(scope="session")
def server_layer(tmp_path_factory) -> Path:
    """Azure's inference server installed once for the session (once per xdist worker): the endpoint tests link
    each test's home to it (a user's home installs it at its first deployment, as the docs' tour shows)."""
    home = tmp_path_factory.mktemp("server-layer-home")
    code = "from mltrain.endpoints import inference_server as s; print(s.ensure_layer(lambda m: None))"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "MLTRAIN_HOME": str(home)},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return Path(out.stdout.strip())
