"""The MLflow store survives its creator being killed: the first `mltrain models register` on a new
MLTRAIN_HOME (which creates the store: MLflow's schema, seconds of Alembic DDL) killed with SIGKILL at
growing delays, then a `models register` and `models list` right after: each succeeds, no traceback
from SQLAlchemy or Alembic. Real processes, a real SQLite store."""
from __future__ import annotations

import os
import subprocess

from support import killed_after, mltrain_exe

DELAYS = [0.4 * i for i in range(1, 11)]  # 0.4 s .. 4 s: before, during and after the schema's creation


def test_a_store_creation_killed_at_any_moment_leaves_a_usable_registry(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.pt").write_bytes(b"weights")
    outcomes = []
    for i, delay in enumerate(DELAYS):
        env = dict(os.environ, MLTRAIN_HOME=str(tmp_path / f"home{i}"))
        outcomes.append(killed_after([*mltrain_exe(), "models", "register", "m", "--path", str(model)], delay, env=env))
        again = subprocess.run([*mltrain_exe(), "models", "register", "m", "--path", str(model)], env=env,
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and "Traceback" not in again.stderr, (delay, again.stdout, again.stderr[-2000:])
        assert "registered m:" in again.stdout
        listed = subprocess.run([*mltrain_exe(), "models", "list"], env=env, capture_output=True, text=True,
                                timeout=120)
        assert listed.returncode == 0 and "m" in listed.stdout, listed.stderr[-2000:]
    assert "killed" in outcomes  # the kills did land
    print(f"\nfirst register killed at {', '.join(f'{d:.1f}s' for d in DELAYS)}: {outcomes}; every next one succeeded")
