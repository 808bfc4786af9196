"""The layers everything else stands on type-check under `mypy --strict`: the job spec and run records,
the runs layer and the backends (the packages and settings are pyproject.toml's [tool.mypy])."""
import hashlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


# A first run in a fresh clone has no cache: 38.8 s on the idle 2-core machine (2026-12-07), more beside CI's other
# tests, past the unit tests' 30 s. A repeat run takes about a second.
@pytest.mark.timeout(180)
def test_strict_packages_type_check(monkeypatch):
    try:
        from mypy import api
    except ImportError:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("mypy is required under CI (it is in mltrain's [test] extra)")
        pytest.skip("mypy is not installed (pip install 'mltrain[test]')")
    # The checkout's files, not the installed wheel's (built from them): mypy would take site-packages
    # for a source folder and every installed module in it for ours. A cache per checkout keeps a repeat
    # run to about a second; a first one reads the imported parts of mltrain, OmegaConf and submitit.
    cache_root = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "mltrain" / "mypy"
    cache = cache_root / hashlib.sha1(str(REPO).encode()).hexdigest()[:12]
    monkeypatch.chdir(REPO)  # [tool.mypy] names the packages relative to the repository
    out, err, code = api.run(["--config-file", str(REPO / "pyproject.toml"), "--cache-dir", str(cache)])
    assert code == 0, (out + err)[-6000:]
