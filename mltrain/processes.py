"""Whether a process of this machine still runs, for the records that name one (a run's driver, a command
mirroring runs, a submitted SDK job's driver): signal 0 asks without touching it, and a zombie (ended,
not yet reaped by its parent) counts as ended."""
from __future__ import annotations

import os


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it exists
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:  # no /proc: signal 0 answered, so it is there
        return True
