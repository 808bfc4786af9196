"""Hydra's own launcher conformance suites, run against `hydra/launcher=mltrain`.

Each job of these suites runs its task function in a real rank process (not in the driver)."""
from __future__ import annotations

import pytest
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.test_utils.launcher_common_tests import IntegrationTestSuite, LauncherTestSuite

from hydra_plugins.mltrain_launcher.launcher import MltrainLauncher


@pytest.fixture(autouse=True)
def _home(home):
    return home


def test_discovery() -> None:
    assert MltrainLauncher.__name__ in [x.__name__ for x in Plugins.instance().discover(Launcher)]


@pytest.mark.parametrize("launcher_name, overrides", [("mltrain", [])])
class TestMltrainLauncher(LauncherTestSuite):
    pass


@pytest.mark.parametrize("task_launcher_cfg, extra_flags",
                         [({"defaults": [{"override hydra/launcher": "mltrain"}, "_self_"]}, ["-m"])])
class TestMltrainLauncherIntegration(IntegrationTestSuite):
    pass


SLURM_COMPUTE = {"kind": "slurm", "poll_s": 0.3, "timeout_min": 10}


@pytest.fixture
def _slurm():
    from slurm_support import require_cluster

    require_cluster()


@pytest.mark.slow
@pytest.mark.usefixtures("_slurm")
@pytest.mark.parametrize("launcher_name, overrides",
                         [("mltrain", ["++hydra.launcher.compute={kind: slurm, poll_s: 0.3, timeout_min: 10}"])])
class TestMltrainLauncherOnSlurm(LauncherTestSuite):
    pass


@pytest.mark.slow
@pytest.mark.usefixtures("_slurm")
@pytest.mark.parametrize("task_launcher_cfg, extra_flags", [(
    {"defaults": [{"override hydra/launcher": "mltrain"}, "_self_"], "hydra": {"launcher": {"compute": SLURM_COMPUTE}}},
    ["-m"])])
class TestMltrainLauncherIntegrationOnSlurm(IntegrationTestSuite):
    pass


def test_a_sweeper_leaves_checking_each_member_to_this_launcher_which_still_refuses_a_bad_one(home, tmp_path) -> None:
    """Issue 66: Hydra's sweepers compose every member once to check it before launching; this launcher composes
    and checks each itself before it starts any, so that first composition is skipped for it (40 s of a
    1,000-member sweep). A bad value in a later member is still refused before any run exists."""
    import subprocess
    import sys
    from pathlib import Path

    from mltrain.config.hydra_internals import BasicSweeper

    launcher = MltrainLauncher()
    launcher.setup(hydra_context=None, task_function=None, config=None)  # type: ignore[arg-type]
    sweeper = BasicSweeper(max_batch_size=None)
    sweeper.launcher = launcher
    sweeper.validate_batch_is_legal([["x=1"]])  # no config and no loader: composing would fail
    app = Path(__file__).parent.parent / "benchmarks" / "assets" / "sleep_app.py"
    done = subprocess.run([sys.executable, str(app), "-m", "x=0,1,abc", "seconds=0", "hydra/launcher=mltrain",
                           f"hydra.sweep.dir={tmp_path / 'sweep'}"], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "abc" in done.stderr, done.stderr[-2000:]
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())
