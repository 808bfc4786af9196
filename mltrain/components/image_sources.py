"""What Convert to Image Directory reads: the members of a folder, an archive or a table of image paths.

Azure's Convert to Image Directory takes a folder or a compressed file (`.zip`, `.tar`, `.gz`, `.bz2`) and
extracts it whole before looking at it. Here every input is a stream of members read one at a time, so a
large archive never sits in memory or on disk twice: a tar (plain, gzip or bzip2) is read in stream mode,
a zip through its central directory, a folder by walking it. A member's name is only ever *checked* here;
where it lands is decided by the converter, inside its own output (never `extractall`).
"""
from __future__ import annotations

import bz2
import csv
import gzip
import os
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterator, List, Optional, Tuple

from mltrain.base.errors import ConfigError, MltrainError
from mltrain.components.designer_errors import InvalidDatasetError

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".gz", ".bz2")
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet")
#: Folders that archiving tools add and that are never data: macOS's resource forks (Azure removes it too).
JUNK_FOLDERS = ("__MACOSX",)
#: Column names looked for when job.path_column / job.label_column are not given.
PATH_COLUMNS = ("path", "image", "image_path", "file", "filename")
LABEL_COLUMNS = ("label", "class", "category")


@dataclass
class Member:
    """One file of the input. `parts` is its checked relative path; `reason` says why it is skipped."""

    name: str
    open: Callable[[], IO[bytes]]
    parts: Tuple[str, ...] = ()
    reason: Optional[str] = None


def suffix_of(path: Path) -> str:
    name = path.name.lower()
    for suffix in sorted(ARCHIVE_SUFFIXES + TABLE_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return suffix
    return path.suffix.lower()


def checked_parts(name: str) -> Tuple[Tuple[str, ...], Optional[str]]:
    """The components of an archive member's name, or why it may not be used as a path. An absolute name
    or one with `..` could land outside the output (the "zip slip"); it is skipped, never rewritten."""
    text = name.replace("\\", "/")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        return (), "absolute path"
    parts = tuple(p for p in text.split("/") if p not in ("", "."))
    if ".." in parts:
        return (), "'..' in path"
    if any("\0" in p for p in parts) or not parts:
        return (), "unusable name"
    if any(p in JUNK_FOLDERS for p in parts):
        return (), "__MACOSX"
    if any(p.startswith(".") for p in parts):
        return (), "hidden file"
    return parts, None


def _member(name: str, opener: Callable[[], IO[bytes]]) -> Member:
    parts, reason = checked_parts(name)
    return Member(name, opener, parts, reason)


# ------------------------------------------------------------------------------------------ archives
def zip_members(path: Path) -> Iterator[Member]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InvalidDatasetError(f"'{path}' is not a readable zip file ({exc})") from None
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            if (info.external_attr >> 16) & 0o170000 == 0o120000:  # a symlink stored by Unix zip
                yield Member(info.filename, _nothing, (), "not a regular file")
                continue
            yield _member(info.filename, lambda info=info: archive.open(info))


def tar_members(path: Path) -> Iterator[Member]:
    """Stream mode ("r|*"): members are read in order, once; memory stays flat whatever the archive's size."""
    try:
        archive = tarfile.open(path, mode="r|*")
    except (tarfile.TarError, OSError) as exc:
        raise InvalidDatasetError(f"'{path}' is not a readable tar archive ({exc})") from None
    with archive:
        try:
            for info in archive:
                if info.isdir():
                    continue
                if not info.isfile():  # symlinks, hard links, devices: never followed, never written
                    yield Member(info.name, _nothing, (), "not a regular file")
                    continue
                yield _member(info.name, lambda info=info: archive.extractfile(info))
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise InvalidDatasetError(f"'{path}' is a damaged archive ({type(exc).__name__}: {exc})") from None


def compressed_members(path: Path) -> Iterator[Member]:
    """A `.gz` or `.bz2`: a compressed tar when it holds one, else one compressed image (`cat.jpg.gz`)."""
    opener = gzip.open if suffix_of(path) == ".gz" else bz2.open
    try:
        with tarfile.open(path, mode="r:*"):
            is_tar = True
    except (tarfile.TarError, OSError, EOFError):
        is_tar = False
    if is_tar:
        yield from tar_members(path)
        return
    inner = path.name[: -len(suffix_of(path))]
    yield _member(inner, lambda: opener(path, "rb"))


def archive_members(path: Path) -> Iterator[Member]:
    suffix = suffix_of(path)
    if suffix == ".zip":
        return zip_members(path)
    if suffix in (".gz", ".bz2"):
        return compressed_members(path)
    return tar_members(path)


def folder_members(root: Path) -> Iterator[Member]:
    """A folder's files, sorted; archives at its top are read as archives (Azure reads one found there)."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        top = Path(dirpath) == root
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if top and suffix_of(path) in ARCHIVE_SUFFIXES and not name.startswith("."):
                yield from archive_members(path)
                continue
            yield _member(path.relative_to(root).as_posix(), lambda path=path: open(path, "rb"))


def _nothing() -> IO[bytes]:
    raise OSError("not a regular file")


# ------------------------------------------------------------------------------------------- tables
def table_columns(path: Path) -> Tuple[List[str], Iterator[List[object]]]:
    """The column names of a CSV, TSV or Parquet table and an iterator over its rows (streamed)."""
    if suffix_of(path) == ".parquet":
        try:
            import pyarrow.parquet as pq  # optional
        except ImportError:
            raise MltrainError(f"reading '{path.name}' (Parquet) needs pyarrow: pip install pyarrow") from None
        table = pq.ParquetFile(path)
        names = list(table.schema_arrow.names)

        def parquet_rows() -> Iterator[List[object]]:
            for batch in table.iter_batches(batch_size=4096):
                columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                yield from (list(row) for row in zip(*columns))

        return names, parquet_rows()
    handle = open(path, newline="", encoding="utf-8-sig")
    reader = csv.reader(handle, delimiter="\t" if suffix_of(path) == ".tsv" else ",")
    header = next(reader, None)
    if not header:
        handle.close()
        raise InvalidDatasetError(f"'{path}' is an empty table: expected a header row naming the image path column")

    def text_rows() -> Iterator[List[object]]:
        with handle:
            yield from reader

    return [h.strip() for h in header], text_rows()


def _column(names: List[str], chosen: Optional[str], candidates: Tuple[str, ...], key: str, path: Path,
            required: bool) -> Optional[int]:
    if chosen:
        if chosen not in names:
            raise ConfigError(key, f"'{path.name}' has no column '{chosen}'", names)
        return names.index(chosen)
    lowered = [n.lower() for n in names]
    for candidate in candidates:
        if candidate in lowered:
            return lowered.index(candidate)
    if required:
        raise ConfigError(key, f"'{path.name}' has none of the columns {', '.join(candidates)}; name the image path "
                               f"column with {key}=...", names)
    return None


def table_members(path: Path, path_column: Optional[str], label_column: Optional[str]) -> Iterator[Member]:
    """Rows of (image path, label) as members named `<label>/<file name>` (or `<file name>` without a label).
    Image paths are read relative to the table's folder (absolute ones as they are); URLs are not fetched."""
    names, rows = table_columns(path)
    at = _column(names, path_column, PATH_COLUMNS, "job.path_column", path, required=True)
    label_at = _column(names, label_column, LABEL_COLUMNS, "job.label_column", path, required=bool(label_column))
    for row in rows:
        if at >= len(row) or row[at] in (None, ""):
            continue
        image = str(row[at]).strip()
        if "://" in image:
            yield Member(image, _nothing, (), "URL (download it first)")
            continue
        source = Path(image).expanduser()
        source = source if source.is_absolute() else path.parent / source
        label = "" if label_at is None or label_at >= len(row) or row[label_at] is None else str(row[label_at]).strip()
        if label and ("/" in label or "\\" in label or label.startswith(".") or "\0" in label):
            yield Member(image, _nothing, (), "label not usable as a folder name")
            continue
        if not source.is_file():
            yield Member(image, _nothing, (), "file not found")
            continue
        name = f"{label}/{source.name}" if label else source.name
        yield _member(name, lambda source=source: open(source, "rb"))


def members_of(input_path: Path, path_column: Optional[str], label_column: Optional[str]) -> Iterator[Member]:
    """Every member of the input, whatever its kind; a folder holding one table at its top is that table."""
    if input_path.is_dir():
        tables = sorted(p for p in input_path.iterdir() if p.is_file() and suffix_of(p) in TABLE_SUFFIXES)
        if len(tables) == 1:
            return table_members(tables[0], path_column, label_column)
        return folder_members(input_path)
    suffix = suffix_of(input_path)
    if suffix in TABLE_SUFFIXES:
        return table_members(input_path, path_column, label_column)
    if suffix in ARCHIVE_SUFFIXES:
        return archive_members(input_path)
    raise ConfigError("job.input_path", f"'{input_path.name}' is neither a folder, an archive nor a table",
                      ARCHIVE_SUFFIXES + TABLE_SUFFIXES)
