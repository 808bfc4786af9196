"""Content digests of files: one sha256 reader for snapshots, pipeline reuse keys and image directories,
so the same bytes get the same digest wherever mltrain compares them."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Union

#: Read in blocks of 1 MiB: memory stays flat for any file size.
BLOCK = 1 << 20


def file_sha256(path: Union[str, Path]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            h.update(block)
    return h.hexdigest()
