"""Fixtures: every test gets its own MLTRAIN_HOME, a copy of the test scripts as its project, and
(unless marked `gpu`) no visible GPU. Helpers live in support.py."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import SCRIPTS


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
