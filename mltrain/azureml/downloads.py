"""An `https` input with no local mapping, downloaded once into a content-addressed cache
(`$MLTRAIN_HOME/cache/downloads/sha256-<digest>/<file name>`), as Azure downloads a web file input.
An index by URL avoids a second download. A dry run downloads too: its plan names the file the run
will read (the pipeline engine checks that a step's input exists), and a URL that cannot be fetched is
refused before anything runs, as the run itself would refuse it."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable
from urllib.parse import urlparse

from mltrain.atomic import atomic_write
from mltrain.config.paths import mltrain_home

TIMEOUT_S = 30


def _cache() -> Path:

    return mltrain_home() / "cache" / "downloads"


def fetch(url: str, on_error: Callable[[str], Exception]) -> str:
    cache = _cache()
    index = cache / "index.json"
    known = json.loads(index.read_text()) if index.is_file() else {}
    name = os.path.basename(urlparse(url).path) or "download"
    if url in known and (cache / known[url] / name).is_file():
        return str(cache / known[url] / name)
    import urllib.request  # startup

    cache.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    digest.update(chunk)
                    tmp.write(chunk)
        except Exception as exc:  # no network, a 404: one line naming the URL and how to map it instead
            os.unlink(tmp.name)
            raise on_error(f"cannot download '{url}' ({type(exc).__name__}: {exc}); map it to a local copy in "
                           ".mltrain/datastores.yaml") from None
    folder = cache / f"sha256-{digest.hexdigest()}"
    folder.mkdir(exist_ok=True)
    shutil.move(tmp.name, folder / name)
    known[url] = folder.name

    atomic_write(index, json.dumps(known, indent=1))
    return str(folder / name)
