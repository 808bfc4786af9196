"""mltrain's state root: `MLTRAIN_HOME`, else `~/.mltrain`. The runs, the MLflow store, the GPU pool's locks,
built environments and the v2 workspace live under it. At the bottom of the layers (standard library only),
so any layer may ask for it."""
from __future__ import annotations

import os
from pathlib import Path


def mltrain_home() -> Path:
    return Path(os.environ.get("MLTRAIN_HOME", "~/.mltrain")).expanduser()


def user_cache_dir() -> Path:
    """The user's cache folder (XDG): `$XDG_CACHE_HOME`, else `~/.cache`. What mltrain keeps there can always be
    made again (the MLflow database template, kept compositions)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser()
