"""Source snapshots: the job's source directory copied into its run at submission.

The job then runs from the copy, so editing the source while a run is queued or running changes
nothing. Ignore rules follow Azure ML: a folder's `.amlignore` if it has one, else its `.gitignore`,
with gitignore semantics (pathspec's GitIgnoreSpec: negation, directory patterns, anchoring;
rules in a sub-folder apply below it). Top-level `outputs/` and `logs/` are the run's own folders
and are never copied, nor is mltrain's own state (the run root, MLTRAIN_HOME) when it lies inside
the source folder: otherwise each run's snapshot would hold every earlier run.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Collection, List, Optional, Tuple

from mltrain.base.digest import file_sha256
from mltrain.base.errors import MltrainError
from mltrain.base.home import mltrain_home

if TYPE_CHECKING:
    import pathspec

IGNORE_FILES = (".amlignore", ".gitignore")
RESERVED = ("outputs", "logs")
WARN_BYTES = 300 * 1024 * 1024
WARN_FILES = 2000


@dataclass
class SnapshotInfo:
    source: str
    hash: str
    files: int
    bytes: int
    seconds: float
    ignore_files: List[str] = field(default_factory=list)
    warning: Optional[str] = None

    def to_json(self) -> dict:
        return asdict(self)


def _rules(directory: Path) -> Optional[pathspec.GitIgnoreSpec]:
    for name in IGNORE_FILES:
        path = directory / name
        if path.is_file():
            # only where a folder has ignore rules: the import is most of a small snapshot's time
            import pathspec  # startup

            try:
                return pathspec.GitIgnoreSpec.from_lines(path.read_text(encoding="utf-8", errors="replace").splitlines())
            except ValueError as exc:  # pathspec's pattern errors are ValueErrors
                raise MltrainError(f"{path}: {exc} (gitignore patterns use '/', not '\\')") from None
    return None


def _ignored(rel: str, is_dir: bool, stack: List[Tuple[str, pathspec.GitIgnoreSpec]]) -> bool:
    """The deepest folder's rules that say anything about `rel` decide, as in git."""
    probe_suffix = "/" if is_dir else ""
    for base, spec in reversed(stack):
        sub = rel[len(base) + 1:] if base else rel
        result = spec.check_file(sub + probe_suffix)
        if result.include is not None:
            return bool(result.include)
    return False


def own_folders(run_dir: str) -> List[str]:
    """mltrain's own state, never part of a snapshot: the run root and MLTRAIN_HOME."""
    return [str(Path(run_dir).parent), str(mltrain_home())]


def select_files(root: Path, exclude: Collection[str] = ()) -> Tuple[List[str], List[str]]:
    """(relative file paths to copy, ignore files that applied), in a stable order. Folders in
    `exclude` (absolute paths) are left out wherever they appear."""
    excluded = {os.path.realpath(p) for p in exclude}
    chosen: List[str] = []
    used: List[str] = []
    stack: List[Tuple[str, pathspec.GitIgnoreSpec]] = []

    def walk(directory: Path, rel_dir: str) -> None:
        spec = _rules(directory)
        if spec is not None:
            stack.append((rel_dir, spec))
            used.append(next(f"{rel_dir}/{n}".lstrip("/") for n in IGNORE_FILES if (directory / n).is_file()))
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                if not rel_dir and entry.name in RESERVED:
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
                if entry.name == ".git" and is_dir:
                    continue
                if _ignored(rel, is_dir, stack):
                    continue
                if is_dir and excluded and os.path.realpath(entry.path) in excluded:
                    continue
                if is_dir:
                    walk(Path(entry.path), rel)
                elif entry.is_file() or entry.is_symlink():
                    chosen.append(rel)
        finally:
            if spec is not None:
                stack.pop()

    walk(root, "")
    return chosen, used


def take(source: str | Path, dest: str | Path, exclude: Collection[str] = ()) -> SnapshotInfo:
    """Copy the selected files of `source` into `dest` (which must not exist) and hash their content."""
    start = time.perf_counter()
    root = Path(source).resolve()
    dest = Path(dest)
    files, used = select_files(root, [*exclude, str(dest)])
    digest = hashlib.sha256()
    total = 0
    dest.mkdir(parents=True)
    made = set()
    for rel in files:
        src = root / rel
        out = dest / rel
        parent = out.parent
        if parent not in made:
            parent.mkdir(parents=True, exist_ok=True)
            made.add(parent)
        if src.is_symlink():
            target = os.readlink(src)
            os.symlink(target, out)
            digest.update(f"L {rel}\0{target}\0".encode())
            continue
        shutil.copy2(src, out)
        data_hash = file_sha256(out)
        size = out.stat().st_size
        total += size
        digest.update(f"F {rel}\0{size}\0{data_hash}\0".encode())
    warning = None
    if total > WARN_BYTES or len(files) > WARN_FILES:
        warning = (f"the snapshot of {root} holds {len(files)} files, {total / 2**20:.0f} MB (more than "
                   f"{WARN_FILES} files or {WARN_BYTES // 2**20} MB): add what the job does not need to .amlignore")
    return SnapshotInfo(str(root), digest.hexdigest(), len(files), total, time.perf_counter() - start, used, warning)




def link_run_folders(snapshot: Path, run_dir: Path) -> None:
    """./outputs and ./logs inside the snapshot are the run's outputs/ and logs/ (seed 001)."""
    for name in RESERVED:
        link = snapshot / name
        if not link.exists():
            link.symlink_to(Path("..") / name)
