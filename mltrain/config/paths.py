"""Where configs come from: the built-in presets, then the user's own folders.

The user's folders are searched first, so a repository can add options to any built-in group
(`compute/gpu-cluster.yaml`), replace a built-in option, or add `experiment/*.yaml` files.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import os
from pathlib import Path
from typing import Iterator, List, Sequence

from mltrain.base.home import mltrain_home

#: Folders looked up in the current directory, in this order.
USER_CONF_DIRS = (".mltrain", "conf")
#: Extra config folders, separated by os.pathsep, searched before those.
CONFIG_PATH_ENV = "MLTRAIN_CONFIG_PATH"


def builtin_conf_dir() -> Path:
    """The presets shipped with mltrain: the `mltrain.conf` package once installed, else the checkout's conf/."""
    spec = importlib.util.find_spec("mltrain.conf")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parents[2] / "conf"


def shipped_options(group: str) -> List[str]:
    """The presets mltrain ships for a config group (`compute` -> the backends' own: conf/compute/*.yaml)."""
    folder = builtin_conf_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def builtin_search_url() -> str:
    """The value given to hydra.main(config_path=...)."""
    if importlib.util.find_spec("mltrain.conf") is not None:
        return "pkg://mltrain.conf"
    return str(builtin_conf_dir())


#: Config folders a job request (mltrain.launch.request) adds for the composition in progress: the
#: search-path plugin reads them here, in the same thread, instead of from the process environment.
_REQUEST_DIRS: contextvars.ContextVar[Sequence[str]] = contextvars.ContextVar("mltrain_request_dirs", default=())


@contextlib.contextmanager
def extra_config_dirs(dirs: Sequence[str]) -> Iterator[None]:
    """Config folders searched first while composing inside this block (in this thread): a job request's,
    a v2 file's repository `.mltrain`, a resumed sweep's recorded search path. Blocks nest: an inner block's
    folders come before the outer ones'."""
    outer = _REQUEST_DIRS.get()
    token = _REQUEST_DIRS.set(tuple(dict.fromkeys([*(str(d) for d in dirs), *outer])))
    try:
        yield
    finally:
        _REQUEST_DIRS.reset(token)


def request_config_dirs() -> List[str]:
    """The extra config folders of the composition in progress, then those of MLTRAIN_CONFIG_PATH."""
    env = [e for e in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep) if e]
    return [*_REQUEST_DIRS.get(), *env]


def user_conf_dirs(cwd: Path | None = None) -> List[Path]:
    cwd = Path(cwd or os.getcwd())
    found: List[Path] = [Path(d).expanduser().resolve() for d in _REQUEST_DIRS.get()]
    for entry in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep):
        if entry:
            found.append(Path(entry).expanduser().resolve())
    builtin = builtin_conf_dir().resolve()
    home = mltrain_home().resolve()
    for name in USER_CONF_DIRS:
        path = (cwd / name).resolve()
        # `.mltrain` in the home directory is mltrain's own state folder, not a config folder.
        if path.is_dir() and path not in (builtin, home) and path not in found:
            found.append(path)
    return found


def list_options(dirs: List[Path]) -> dict:
    """{group: sorted option names} over the given config folders (YAML files one level down)."""
    groups: dict = {}
    for base in dirs:
        if not base.is_dir():
            continue
        for sub in sorted(base.iterdir()):
            if sub.is_dir() and not sub.name.startswith(("_", ".")) and sub.name != "hydra":
                names = {p.stem for p in sub.glob("*.yaml")} | {p.stem for p in sub.glob("*.yml")}
                if names:
                    groups.setdefault(sub.name, set()).update(names)
    return {g: sorted(v) for g, v in sorted(groups.items())}
