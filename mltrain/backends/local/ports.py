"""A free MASTER_PORT for each local run, with no collision between runs started at once.

The OS picks an unused port (bind to port 0). Two runs on one machine could still be handed the
same port between that pick and rank 0 binding it (pytorch #73320), so each pick is also claimed in
a lock file held for the whole run: a second run that sees the claim picks again.
"""
from __future__ import annotations

import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import Optional, TextIO

_REGISTRY = Path(tempfile.gettempdir()) / "mltrain-ports"


class PortClaim:
    def __init__(self, port: int, handle: Optional[TextIO]) -> None:
        self.port = port
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            try:
                fcntl.flock(self._handle, fcntl.LOCK_UN)
            finally:
                self._handle.close()
                self._handle = None

    def __enter__(self) -> PortClaim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _os_free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        _, port = s.getsockname()  # an AF_INET address: (host, port)
        return int(port)


def claim_port(host: str = "127.0.0.1", attempts: int = 50) -> PortClaim:
    _REGISTRY.mkdir(mode=0o1777, parents=True, exist_ok=True)
    last: Optional[int] = None
    for _ in range(attempts):
        port = _os_free_port(host)
        last = port
        handle = open(_REGISTRY / f"{port}.lock", "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return PortClaim(port, handle)
    raise RuntimeError(f"no free port after {attempts} attempts (last tried {last})")
