"""What the UI test needs: full MLflow (its UI server), Playwright for Python and Debian's chromium, all
installed by `bash scripts/test.sh`. Skipped with one line where absent, an error under CI
(MLTRAIN_REQUIRE_UI=1, or CI true)."""
from __future__ import annotations

import importlib.util
import shutil

from support import require

CHROMIUM = ("chromium", "chromium-browser")


def chromium() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM) if path), None)


def ui_problem() -> str | None:
    from mltrain.cli.ui import server_problem

    problem = server_problem()
    if problem:
        return problem
    if importlib.util.find_spec("playwright") is None:
        return "no Playwright for Python: pip install '.[test]'"
    if chromium() is None:
        return "no chromium: apt-get install chromium (scripts/test.sh does as root)"
    return None


def require_ui() -> None:
    require(ui_problem(), "MLTRAIN_REQUIRE_UI", "MLflow's UI in a browser")
