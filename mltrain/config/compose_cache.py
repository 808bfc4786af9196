"""Compositions kept across commands: Hydra's composition of the `mltrain` config costs 0.1-0.15 s each on a
2-core machine (its defaults list, its YAML loader, merging every option), and a command composes once plus once
per distinct set of config groups its runs choose (a 3-step pipeline: 3 times). The result depends only on its
inputs, so a composition is kept in the user's cache folder (`$XDG_CACHE_HOME/mltrain/compose/`, by default
`~/.cache/mltrain/compose/`: not under MLTRAIN_HOME, which a dry run leaves as it found it), named by a digest of
all of them:

- the overrides, and the config's name;
- every config file Hydra can see: the content of each YAML file in each folder of the search path (the user's
  `.mltrain/` and `conf/`, `MLTRAIN_CONFIG_PATH`, a request's folders, mltrain's presets, Hydra's own), so an edit
  is seen however quickly it follows the last one;
- what the ConfigStore holds: the in-memory config nodes of the request, and the code that registers schemas
  (mltrain's `spec`, `config` and `backends` modules, the installed `hydra_plugins`: name, size and time of each
  file), with the versions of Hydra and OmegaConf;
- the current folder (`hydra.runtime.cwd`).

A composition that depends on anything else is not kept: one whose config adds folders to the search path
(`hydra.searchpath`) or copies environment variables (`hydra.job.env_copy`), or that loaded a compute schema
from an installed package. Only commands that run no other Hydra app use the cache (the `mltrain` command and
its drivers), never a Python caller's process. `MLTRAIN_COMPOSE_CACHE=0` turns it off. Interpolations
(`${now:...}`, `${oc.env:...}`) are kept unresolved, as Hydra leaves them, and resolve when the run is frozen.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from importlib import util as importlib_util
from pathlib import Path
from typing import Any, List, Optional, Sequence

from mltrain.base.atomic import atomic_write_bytes
from mltrain.base.home import user_cache_dir
from mltrain.config.memory_nodes import ConfigNode

ENV = "MLTRAIN_COMPOSE_CACHE"
#: entries kept; beyond that the oldest half is removed when a new one is written
KEEP = 256
#: a search path with more config bytes than this is not digested (a folder named conf/ holding data)
MAX_BYTES = 8 * 1024 * 1024
#: the code whose dataclasses become ConfigStore nodes, under the installed mltrain package
CODE_FOLDERS = ("spec", "config", "backends")
#: bump when what is kept changes shape
LAYOUT = 1


def cache_folder() -> Path:
    return user_cache_dir() / "mltrain" / "compose"


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


class ComposeCache:
    """The kept compositions of one Hydra session (mltrain.config.hydra_session): its search path and nodes are
    digested once, on first use."""

    def __init__(self, loader: Any, nodes: Sequence[ConfigNode]) -> None:
        self._loader, self._nodes = loader, tuple(nodes)
        self._base: Optional[str] = None
        self.folder = cache_folder()
        self.hits = self.misses = 0

    def get(self, config_name: str, overrides: Sequence[str]) -> Optional[Any]:
        key = self._key(config_name, overrides)
        if key is None:
            return None
        try:
            data = (self.folder / f"{key}.pkl").read_bytes()
            cfg = pickle.loads(data)
        except Exception:  # noqa: BLE001 - none yet, or a damaged one: composed again and rewritten
            self.misses += 1
            return None
        self.hits += 1
        return cfg

    def put(self, config_name: str, overrides: Sequence[str], cfg: Any) -> None:
        if not keepable(cfg):
            return
        key = self._key(config_name, overrides)
        if key is None:
            return
        from omegaconf import OmegaConf  # startup

        try:
            OmegaConf.clear_cache(cfg)  # nothing resolved while composing is kept: `${now:...}` is each command's
            data = pickle.dumps(cfg)
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(self.folder / f"{key}.pkl", data)
            self._prune()
        except Exception:  # noqa: BLE001 - the cache is an optimisation: a full disk or an odd value skips it
            return

    def _key(self, config_name: str, overrides: Sequence[str]) -> Optional[str]:
        if self._base is None:
            self._base = _base_digest(self._loader, self._nodes) or ""
        if not self._base:
            return None
        text = json.dumps([LAYOUT, self._base, config_name, list(overrides)])
        return hashlib.sha256(text.encode()).hexdigest()[:40]

    def _prune(self) -> None:
        entries = list(self.folder.glob("*.pkl"))
        if len(entries) <= KEEP:
            return
        entries.sort(key=lambda p: p.stat().st_mtime if p.exists() else 0.0)
        for path in entries[: len(entries) // 2]:
            path.unlink(missing_ok=True)


def keepable(cfg: Any) -> bool:
    """Whether a composition depends on nothing the key holds not (see the module's docstring)."""
    from omegaconf import OmegaConf  # startup

    from mltrain.config.schema_store import loaded_external_schemas  # startup

    if OmegaConf.select(cfg, "hydra.searchpath", default=None) or OmegaConf.select(cfg, "hydra.job.env_copy",
                                                                                     default=None):
        return False
    return not loaded_external_schemas()


def _base_digest(loader: Any, nodes: Sequence[ConfigNode]) -> Optional[str]:
    """Everything but the overrides: None when the search path is too large to read each time."""
    import hydra  # startup
    import omegaconf  # startup

    digest = hashlib.sha256()
    digest.update(json.dumps([hydra.__version__, omegaconf.__version__, os.getcwd()]).encode())
    total = 0
    for element in loader.get_search_path().get_path():
        digest.update(f"\0path {element.path}".encode())
        folder = _folder_of(str(element.path))
        if folder is None:
            continue
        for path in _config_files(folder):
            try:
                data = path.read_bytes()
            except OSError as exc:  # a dangling link, a file gone meanwhile: Hydra says so if it is ever read
                data = f"unreadable {exc.errno}".encode()
            total += len(data)
            if total > MAX_BYTES:
                return None
            digest.update(f"\0{path.relative_to(folder)}\0".encode())
            digest.update(data)
    for node in nodes:
        digest.update(json.dumps([node.group, node.name, node.package, node.values], sort_keys=True,
                                 default=str).encode())
    for path in _code_files():
        stat = path.stat()
        digest.update(f"\0{path}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def _folder_of(url: str) -> Optional[Path]:
    """The folder a search path entry reads: `file://DIR` (or a bare path, as Hydra takes one), `pkg://PACKAGE`;
    None for the ConfigStore's."""
    if url.startswith("file://"):
        return Path(url[len("file://"):])
    if "://" not in url:
        return Path(url)
    if url.startswith("pkg://"):
        try:
            spec = importlib_util.find_spec(url[len("pkg://"):])
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(list(spec.submodule_search_locations)[0])
    return None


def _config_files(folder: Path) -> List[Path]:
    if not folder.is_dir():
        return []
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found += [Path(root) / f for f in sorted(files) if f.endswith((".yaml", ".yml"))]
    return found


def _code_files() -> List[Path]:
    """mltrain's modules that register schemas, and every installed Hydra plugin's files."""
    import hydra_plugins  # startup

    package = Path(__file__).resolve().parents[1]
    out: List[Path] = []
    for name in CODE_FOLDERS:
        out += sorted((package / name).rglob("*.py"))
    for root in hydra_plugins.__path__:
        out += sorted(Path(root).rglob("*.py"))
    return out
