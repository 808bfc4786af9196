"""A web file input with no local mapping (`https://...`, or a public blob's `wasbs://` URL, fetched as
its `https://` form), downloaded once into a cache under its address
(`$MLTRAIN_HOME/cache/downloads/url-<sha256 of the URL>/<file name>`), as Azure downloads a web file
input when the job starts. The folder is known before anything is fetched, so a dry run names the very
file the run will read and fetches nothing (a dry run plans and changes nothing; whether the URL answers
is the run's business, refused in one line when `mltrain job create` starts it)."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlparse

from mltrain.base.home import mltrain_home

TIMEOUT_S = 30
#: Azure Blob Storage's own URL form: wasbs://CONTAINER@ACCOUNT.blob.core.windows.net/PATH (wasb: unencrypted).
BLOB = re.compile(r"^wasbs?://([^@/]+)@([^/]+\.blob\.core\.windows\.net)(?:/(.*))?$")


def web_address(uri: str) -> Optional[str]:
    """The https address a data URI is fetched from: an http(s) URL itself, a public blob's wasbs URL as
    https://ACCOUNT.blob.core.windows.net/CONTAINER/PATH; None for anything else (a datastore URI)."""
    if uri.startswith(("https://", "http://")):
        return uri
    blob = BLOB.match(uri)
    if blob is None:
        return None
    container, account, rest = blob.groups()
    return f"https://{account}/{container}/{rest or ''}"


def planned(url: str) -> str:
    """Where `fetch(url)` puts the file: known without fetching it."""
    name = os.path.basename(urlparse(url).path) or "download"
    return str(_cache() / f"url-{hashlib.sha256(url.encode()).hexdigest()[:32]}" / name)


def _cache() -> Path:

    return mltrain_home() / "cache" / "downloads"


def fetch(url: str, on_error: Callable[[str], Exception]) -> str:
    """The file at `planned(url)`, downloaded first unless a run before downloaded it; one line naming
    the URL when it cannot be fetched."""
    target = Path(planned(url))
    if target.is_file():
        return str(target)
    import urllib.request  # startup

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
                shutil.copyfileobj(response, tmp, 1 << 20)
        except Exception as exc:  # no network, a 404: one line naming the URL and how to map it instead
            os.unlink(tmp.name)
            with contextlib.suppress(OSError):  # its folder too, unless another run's file is in it
                target.parent.rmdir()
            raise on_error(f"cannot download '{url}' ({type(exc).__name__}: {exc}); map it to a local copy in "
                           ".mltrain/datastores.yaml") from None
    os.replace(tmp.name, target)  # whole or not there: a second run never reads half a file
    return str(target)
