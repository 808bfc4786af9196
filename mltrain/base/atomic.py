"""Atomic file writes: a reader (another rank, `mltrain runs`, a requeued job) never sees half a file."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: Path, data: bytes) -> os.stat_result:
    """Write to a temporary name in the same folder, then rename into place. Returns the file's stat as
    written: a rename keeps the inode, so it tells this write apart from any later one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            st = os.fstat(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        os.unlink(tmp)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT) and not exc.filename:  # say which file could not be written
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    except BaseException:
        os.unlink(tmp)
        raise
    return st


def atomic_write(path: Path, text: str) -> os.stat_result:
    return atomic_write_bytes(path, text.encode("utf-8"))
