"""Processes of this machine: whether one still runs, for the records that name one (a run's driver, a
command mirroring runs, a submitted SDK job's driver), and stopping a process group in escalating steps."""
from __future__ import annotations

import os
import subprocess
from typing import Callable, Optional, Sequence, Tuple


def pid_alive(pid: int) -> bool:
    """Signal 0 asks without touching it; a zombie (ended, not yet reaped by its parent) counts as ended."""
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


def stop_group(pgid: int, steps: Sequence[Tuple[int, Optional[float]]], ended: Callable[[Optional[float]], bool]) -> bool:
    """Signal the process group `pgid` step by step, (signal, grace): after each, `ended(grace)` waits up to
    grace seconds (None: without end) for the process that matters, and the steps stop once it says so.
    Returns whether it ended. A group already gone is not an error: its leader may still need reaping."""
    for sig, grace in steps:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        if ended(grace):
            return True
    return False


def within(wait: Callable[[Optional[float]], object]) -> Callable[[Optional[float]], bool]:
    """`proc.wait` or `proc.communicate` as stop_group's `ended`: True once it returns, False on its timeout."""
    def ended(grace: Optional[float]) -> bool:
        try:
            wait(grace)
        except subprocess.TimeoutExpired:
            return False
        return True

    return ended
