"""Step reuse by content, the way DVC's dvc.lock does it, and the reason for every decision.

A step's key hashes what decides its result: the resolved step config (arguments, params,
distribution; paths of its own run and of its inputs replaced by their names), the source snapshot's
files, mltrain's own version for built-in components, the environment's cache key, the step's
`version`, its output names, and the digest of every input: an upstream output by the digest recorded
when it was produced, an external path by content (or by size and mtime, or not at all, when the
step says so). Azure ML hashes a dataset's definition instead, so it reuses steps on stale data.

Producers are indexed in <runs root>/_pipelines/index.jsonl (one line per completed step that ran);
a step whose key is there, with outputs still as they were written, is reused. Otherwise the reason
is found by comparing its parts with the newest earlier run of the same step.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

from mltrain.base.digest import file_sha256 as file_hash

INDEX = Path("_pipelines") / "index.jsonl"
#: Config keys that do not change what a step computes: where and how it runs, and names of paths
#: whose content is hashed on its own (the snapshot, the environment, the inputs).
NOT_IN_KEY = ("run.", "compute.", "sweep.", "pipeline", "environment.", "inputs.", "outputs.", "dry_run",
              "experiment_name", "job.source_directory", "distribution.timeout_s", "distribution.close_process_group",
              "distribution.slurm_mpi", "azureml")


# ---------------------------------------------------------------------------------------- digests
def _files(root: Path) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames.sort()
        for name in sorted(filenames):
            yield Path(dirpath) / name


def listing(root: Path) -> Dict[str, List[int]]:
    """{relative path: [size, mtime_ns]} of every file under root: cheap to take again, to tell
    whether outputs are still as they were written."""
    out = {}
    for path in _files(root):
        st = path.stat()
        out[str(path.relative_to(root)) if path != root else path.name] = [st.st_size, st.st_mtime_ns]
    return out


def digest(root: Path, mode: str = "content") -> str:
    """The digest of a file or folder: its files' names and content (mode content), names, sizes and
    mtimes (mtime), or only its path (none)."""
    if mode == "none":
        return "none:" + str(root)
    h = hashlib.sha256()
    for path in _files(root):
        rel = str(path.relative_to(root)) if path != root else path.name
        if mode == "mtime":
            st = path.stat()
            h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        else:
            h.update(f"{rel}\0{file_hash(path)}\0".encode())
    return f"{mode}:{h.hexdigest()}"


def outputs_record(run_dir: Path, names: List[str]) -> Dict[str, Dict[str, Any]]:
    """What a step produced, by output: the content digest and the file listing."""
    return {name: {"digest": digest(run_dir / "outputs" / name), "files": listing(run_dir / "outputs" / name)}
            for name in names}


def intact(run_dir: Path, produced: Dict[str, Dict[str, Any]]) -> Optional[str]:
    """None when every output is still as it was written, else what changed."""
    for name, info in produced.items():
        folder = run_dir / "outputs" / name  # a folder, or the one file a step put there (a HyperDriveStep's model)
        if not folder.exists():
            return f"output {name} of run {run_dir.name} is gone"
        if listing(folder) != info["files"]:
            return f"output {name} of run {run_dir.name} was changed after it was written"
    return None


def snapshot_files(run_dir: Path) -> Dict[str, str]:
    """{file: sha256} of the run's source snapshot (its outputs/logs links left out)."""
    root = run_dir / "snapshot"
    if not root.is_dir():
        return {}
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in ("outputs", "logs")]
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            rel = os.path.normpath(os.path.join(rel_dir, name))
            out[rel] = "link:" + os.readlink(path) if path.is_symlink() else file_hash(path)
    return out


# ---------------------------------------------------------------------------------------- the key
def flatten(value: Any, prefix: str = "") -> Dict[str, Any]:
    if isinstance(value, dict):
        out: Dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out or {prefix[:-1]: {}}
    return {prefix[:-1]: value}


def config_part(config: Dict[str, Any], names: Dict[str, str]) -> Dict[str, Any]:
    """The resolved config as the key sees it: keys that change results only, with the paths in
    `names` ({path: its name}) replaced by that name, since a new run's folders are new every time."""
    longest_first = sorted(names.items(), key=lambda kv: -len(kv[0]))

    def named(value: Any) -> Any:
        if isinstance(value, str):
            for path, name in longest_first:
                value = value.replace(path, name)
            return value
        if isinstance(value, list):
            return [named(v) for v in value]
        return value

    flat = flatten(config)
    return {k: named(v) for k, v in sorted(flat.items()) if not k.startswith(NOT_IN_KEY)}


def key_of(parts: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------------------------------- the index
def record(root: Path, entry: Dict[str, Any]) -> None:
    """Add a producer to the index. One short line in one O_APPEND write: concurrent pipelines never
    interleave within a line."""
    path = root / INDEX
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps({**entry, "time": time.time()}, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def entries(root: Path) -> List[Dict[str, Any]]:
    path = root / INDEX
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by a crash: the entry is lost, not the index
            continue
    return out


# ---------------------------------------------------------------------------------------- reasons
def explain(old: Dict[str, Any], new: Dict[str, Any], limit: int = 4) -> List[str]:
    """What differs between an earlier step's key parts and this one's, in the user's words."""
    reasons: List[str] = []
    if old.get("program") != new.get("program"):
        reasons.append(f"program {old.get('program')} -> {new.get('program')}")
    if old.get("version") != new.get("version"):
        reasons.append(f"version {old.get('version')} -> {new.get('version')}")
    a, b = old.get("source") or {}, new.get("source") or {}
    for name in sorted(set(a) | set(b)):
        if name not in a:
            reasons.append(f"source file {name} added")
        elif name not in b:
            reasons.append(f"source file {name} removed")
        elif a[name] != b[name]:
            reasons.append(f"source file {name} changed")
    a, b = _items(old.get("config") or {}), _items(new.get("config") or {})
    for name in sorted(set(a) | set(b)):
        if a.get(name, "<unset>") != b.get(name, "<unset>"):
            label = f"param {name[len('job.params.'):]}" if name.startswith("job.params.") else f"config {name}"
            reasons.append(f"{label} {_show(a.get(name, '<unset>'))} -> {_show(b.get(name, '<unset>'))}")
    if old.get("environment") != new.get("environment"):
        reasons.append("the environment changed")
    a, b = old.get("inputs") or {}, new.get("inputs") or {}
    for name in sorted(set(a) | set(b)):
        if a.get(name) == b.get(name):
            continue
        if name not in a or name not in b:
            reasons.append(f"input {name} {'added' if name not in a else 'removed'}")
        elif str(b[name]).startswith("pending:"):
            reasons.append(f"input {name}: upstream step {b[name].split(':', 2)[1]} runs again")
        else:
            reasons.append(f"input {name}: content changed")
    if old.get("outputs") != new.get("outputs"):
        reasons.append(f"outputs {old.get('outputs')} -> {new.get('outputs')}")
    if len(reasons) > limit:
        reasons = reasons[:limit] + [f"and {len(reasons) - limit} more"]
    return reasons


def _items(config: Dict[str, Any]) -> Dict[str, Any]:
    """Lists of the same length compared item by item (`job.arguments[3] 0 -> 3`), not as a whole."""
    out: Dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, list):
            out.update({f"{key}[{i}]": v for i, v in enumerate(value)})
            out[f"{key}.length"] = len(value)
        else:
            out[key] = value
    return out


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 40 else text[:37] + "..."
