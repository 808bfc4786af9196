"""The runs index: one SQLite row per run folder, so that looking at 10,000 runs does not parse 10,000
run.json files.

It lives at <runs root>/.index/runs.sqlite (WAL, so readers never wait for a writer). The run folders
stay the truth: each row carries the key (inode, mtime in ns, size) of the run.json it was read
from, and a row is used only once its run.json was stat'ed and found with that key; otherwise the
file is parsed again. A run.json is always written under a temporary name and renamed, so every write
gives it a new inode: a row written from an older record than the file on disk never matches,
whichever writer's row landed last. So a run.json damaged by hand, two writers racing and a deleted
index come out right on the next look; the index only saves the parsing.

`scan` checks every row (a stat per run); `newest`, what `runs list` uses, checks only the rows it
returns (the newest N, those that have not ended, those unreadable), and finds folders added or
removed by hand from the runs root's own mtime, recorded at the last look (then a listing of its
names, not a stat per run): a run.json edited by hand in a run older than the newest N is seen when
that run is looked at.

The record writer (mltrain.runs.record) notes each save here; a note that fails (a read-only root, a
locked database) is dropped, never the run's: the next reader repairs the row from the folder.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from mltrain.base.errors import MltrainError
from mltrain.jobspec.records import RunDoc
from mltrain.jobspec.status import TERMINAL

INDEX_DIR = ".index"
INDEX_FILE = "runs.sqlite"
#: bumped when the table changes: an index of another version is rebuilt from the folders.
VERSION = 2
BUSY_MS = 2000

Key = Tuple[int, int, int]


@dataclass
class Row:
    """What `runs list` shows of a run, and what finding runs by experiment or sweep needs."""

    folder: str
    id: str
    status: str
    experiment: str
    backend: str
    compute: str
    created: float
    ended_at: float
    world_size: int
    sweep_dir: Optional[str]
    sweep_index: Optional[int]
    pipeline: bool

    @classmethod
    def of(cls, folder: str, doc: RunDoc) -> Row:
        # keyed by the folder's name: a copied or renamed folder is its own row
        return cls(folder, doc.id, doc.status, doc.experiment, doc.backend, doc.compute, doc.created, doc.ended_at,
                   doc.world.world_size, doc.sweep.dir, doc.sweep.index, doc.pipeline is not None)


COLUMNS = ("folder", "id", "status", "experiment", "backend", "compute", "created", "ended_at", "world_size",
           "sweep_dir", "sweep_index", "pipeline")
SCHEMA = f"""CREATE TABLE IF NOT EXISTS runs (
  folder TEXT PRIMARY KEY, id TEXT, status TEXT, experiment TEXT, backend TEXT, compute TEXT, created REAL, ended_at REAL,
  world_size INTEGER, sweep_dir TEXT, sweep_index INTEGER, pipeline INTEGER,
  ino INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL, unreadable INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created);
CREATE TABLE IF NOT EXISTS seen (root_mtime_ns INTEGER);
PRAGMA user_version = {VERSION};"""
UPSERT = (f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}, ino, mtime_ns, size, unreadable) "
          f"VALUES ({', '.join('?' * (len(COLUMNS) + 4))})")

_open: Dict[Tuple[int, str], sqlite3.Connection] = {}  # per process: a forked child opens its own
# A sweep's controller saves its members' records from several threads over one connection: a note
# must not land inside another thread's transaction.
_lock = threading.Lock()


def path_of(root: Path) -> Path:
    return Path(root) / INDEX_DIR / INDEX_FILE


def key_of(st: os.stat_result) -> Key:
    return st.st_ino, st.st_mtime_ns, st.st_size


def connect(root: Path) -> sqlite3.Connection:
    """The index of `root`, created (or rebuilt empty, when of another version) on first use."""
    db = path_of(root)
    cached = _open.pop((os.getpid(), str(db)), None)
    if cached is not None:
        if db.exists():
            _open[(os.getpid(), str(db))] = cached
            return cached
        cached.close()  # deleted by hand: a new one is made
    db.parent.mkdir(exist_ok=True)
    conn = sqlite3.connect(str(db), timeout=BUSY_MS / 1000, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_MS}")
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")  # a row lost to a power cut is repaired from its folder
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, VERSION):
            conn.executescript("DROP TABLE IF EXISTS runs; DROP TABLE IF EXISTS seen;")
        if version != VERSION:
            conn.executescript(SCHEMA)
    except BaseException:
        conn.close()
        raise
    _open[(os.getpid(), str(db))] = conn
    return conn


def _values(row: Optional[Row], folder: str, key: Key) -> Tuple[Any, ...]:
    if row is None:  # a run.json that cannot be read: kept with its key, so it is not parsed on every look
        return (folder,) + (None,) * (len(COLUMNS) - 1) + key + (1,)
    return tuple(getattr(row, c) for c in COLUMNS) + key + (0,)


def note(run_dir: Path, doc: RunDoc, st: os.stat_result) -> None:
    """The record writer's upsert: `st` is the stat of the run.json just written (before its rename)."""
    run_dir = Path(run_dir)
    try:
        with _lock:
            conn = connect(run_dir.parent)
            conn.execute(UPSERT, _values(Row.of(run_dir.name, doc), run_dir.name, key_of(st)))
    except (sqlite3.Error, OSError):
        pass  # the folder holds the record; the next reader puts the row right


def read_folder(run_dir: Path) -> Tuple[Optional[Row], Optional[Key]]:
    """(row, key) of a run folder from its run.json, read and stat'ed through one open file; (None, key)
    when it cannot be read, (None, None) when there is none."""
    try:
        with open(run_dir / "run.json", "rb") as f:
            key = key_of(os.fstat(f.fileno()))
            raw = f.read()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None, None
    try:
        return Row.of(run_dir.name, RunDoc.from_json(json.loads(raw))), key
    except (ValueError, MltrainError):
        return None, key


def _folders(root: Path) -> Iterator[Tuple[str, Key]]:
    """(name, run.json key) of every folder of `root` that holds a run.json, in directory order."""
    with os.scandir(root) as entries:
        for entry in entries:
            if not entry.is_dir():
                continue
            try:
                st = os.stat(entry.path + "/run.json")
            except (FileNotFoundError, NotADirectoryError):
                continue
            yield entry.name, key_of(st)


def scan(root: Path, unreadable: Optional[List[Path]] = None) -> List[Row]:
    """A row for every run under `root`, in directory order (as `iter_runs`), checked against the
    folders; rows that were missing or stale are read from their run.json and written back, rows of
    folders gone are dropped. Without a usable index, every run.json is read."""
    root = Path(root)
    if not root.is_dir():
        return []
    conn: Optional[sqlite3.Connection] = None
    known: Dict[str, Tuple[Any, ...]] = {}
    try:
        conn = connect(root)
        known = {r[0]: r for r in conn.execute(f"SELECT {', '.join(COLUMNS)}, ino, mtime_ns, size, unreadable FROM runs")}
    except (sqlite3.Error, OSError):
        conn = None
    n = len(COLUMNS)
    rows: List[Row] = []
    changed: List[Tuple[Any, ...]] = []
    for name, key in _folders(root):
        have = known.pop(name, None)
        if have is not None and tuple(have[n:n + 3]) == key:
            if have[n + 3]:
                if unreadable is not None:
                    unreadable.append(root / name)
            else:
                rows.append(Row(*have[:n]))
            continue
        row, fresh = read_folder(root / name)
        if fresh is None:  # removed since the listing
            continue
        changed.append(_values(row, name, fresh))
        if row is not None:
            rows.append(row)
        elif unreadable is not None:
            unreadable.append(root / name)
    if conn is not None and (changed or known):
        try:
            with _lock, conn:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("DELETE FROM runs WHERE folder = ?", [(name,) for name in known])
                conn.executemany(UPSERT, changed)
        except sqlite3.Error:
            pass  # another look, or a read-only root: the rows are right in memory all the same
    return rows


def _recheck(conn: sqlite3.Connection, root: Path, folders: List[str]) -> None:
    """Stat each folder's run.json; rows whose key differs are read again, rows without one dropped."""
    changed: List[Tuple[Any, ...]] = []
    gone: List[Tuple[str]] = []
    keys = {r[0]: tuple(r[1:]) for r in conn.execute(
        f"SELECT folder, ino, mtime_ns, size FROM runs WHERE folder IN ({', '.join('?' * len(folders))})", folders)}
    for name in folders:
        try:
            key = key_of(os.stat(root / name / "run.json"))
        except (FileNotFoundError, NotADirectoryError):
            gone.append((name,))
            continue
        if keys.get(name) != key:
            row, fresh = read_folder(root / name)
            if fresh is None:
                gone.append((name,))
            else:
                changed.append(_values(row, name, fresh))
    _write(conn, changed, gone)


def _write(conn: sqlite3.Connection, changed: List[Tuple[Any, ...]], gone: List[Tuple[str]],
           seen: Optional[int] = None) -> None:
    if not (changed or gone or seen is not None):
        return
    with _lock, conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("DELETE FROM runs WHERE folder = ?", gone)
        conn.executemany(UPSERT, changed)
        if seen is not None:
            conn.execute("DELETE FROM seen")
            conn.execute("INSERT INTO seen VALUES (?)", (seen,))


def _reconcile(conn: sqlite3.Connection, root: Path) -> None:
    """When the runs root changed since the last look (a run made, a folder removed or copied in by
    hand): rows for folders that are new to the index, none for folders gone."""
    st = os.stat(root)
    if conn.execute("SELECT root_mtime_ns FROM seen").fetchone() == (st.st_mtime_ns,):
        return
    names = set(os.listdir(root))
    known = {r[0] for r in conn.execute("SELECT folder FROM runs")}
    changed: List[Tuple[Any, ...]] = []
    for name in names - known:
        row, key = read_folder(root / name)
        if key is not None:
            changed.append(_values(row, name, key))
    # a change within the filesystem clock's last tick could share this mtime: looked at again next time
    recent = time.time() - st.st_mtime < 1.0
    _write(conn, changed, [(name,) for name in known - names], None if recent else st.st_mtime_ns)


def newest(root: Path, n: int, unreadable: Optional[List[Path]] = None) -> List[Row]:
    """The newest `n` runs that have ended and every run that has not, newest first, each row checked
    against its run.json (see the module's doc); unreadable folders go to `unreadable`. Without a
    usable index, every run.json is read (`scan`)."""
    root = Path(root)
    if not root.is_dir():
        return []
    try:
        conn = connect(root)
        _reconcile(conn, root)
        query = (f"SELECT {', '.join(COLUMNS)} FROM runs WHERE unreadable = 0 AND status NOT IN ({', '.join('?' * len(TERMINAL))}) "
                 f"UNION SELECT * FROM (SELECT {', '.join(COLUMNS)} FROM runs WHERE unreadable = 0 "
                 f"AND status IN ({', '.join('?' * len(TERMINAL))}) ORDER BY created DESC LIMIT ?)")
        checked: Set[str] = set()
        while True:  # a row read again may move (or leave) the newest n: until every one returned was checked
            rows = [Row(*r) for r in conn.execute(query, TERMINAL + TERMINAL + (n,))]
            bad = [r[0] for r in conn.execute("SELECT folder FROM runs WHERE unreadable = 1")]
            todo = [name for name in [r.folder for r in rows] + bad if name not in checked]
            if not todo:
                break
            _recheck(conn, root, todo)
            checked.update(todo)
    except (sqlite3.Error, OSError):
        rows = scan(root, unreadable)
        bad = []
    if unreadable is not None:
        unreadable.extend(root / name for name in bad)
    return sorted(rows, key=lambda r: r.created, reverse=True)
