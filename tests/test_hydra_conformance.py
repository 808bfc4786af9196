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
