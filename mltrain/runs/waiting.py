"""The one wait loop of the engine: ask a question at an interval until it says done or time runs out.
The run handle's wait, the Python API and the SDK stand-ins wait through it (and, one by one, the
features' own loops); backends keep their own polling of their schedulers."""
from __future__ import annotations

import time
from typing import Callable, Optional


def wait_until(done: Callable[[], bool], timeout: Optional[float] = None, poll: float = 0.05) -> bool:
    """Ask `done` every `poll` seconds until it is true (True) or `timeout` seconds have passed (False)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while not done():
        if deadline is not None and time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True
