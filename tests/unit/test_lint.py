"""The code base stays clean under the project's ruff configuration (pyproject.toml)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_ruff_is_clean():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("ruff is required under CI (it is in mltrain's [test] extra)")
        pytest.skip("ruff is not installed (pip install 'mltrain[test]')")
    out = subprocess.run([ruff, "check", "--no-cache", str(REPO)], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stdout[-4000:]
