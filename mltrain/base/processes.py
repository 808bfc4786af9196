"""Processes of this machine: whether one still runs, for the records that name one (a run's driver, a
command mirroring runs, a submitted SDK job's driver), and stopping a process group in escalating steps."""
from __future__ import annotations

import os
import signal
import subprocess
from types import FrameType
from typing import Callable, Dict, Optional, Sequence, Tuple


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


def run_in_foreground(argv: Sequence[str], cwd: str, env: Optional[Dict[str, str]] = None,
                      forward: Sequence[int] = (signal.SIGTERM,), ignore: Sequence[int] = ()) -> int:
    """Run another mltrain command as this process's child in the foreground and exit as it does: the signals
    in `forward` are passed to it (it is the one that cancels and records), those in `ignore` are left to it
    (a terminal's Ctrl-C reaches both). Returns its exit code, 128+N for a signal N. The one way a command
    starts another that does its work (`runs resume` in the sweep's folder, a pipeline's sweep step)."""
    proc = subprocess.Popen(list(argv), cwd=cwd, env=env)

    def passed_on(signum: int, frame: Optional[FrameType]) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.getsignal(sig) for sig in (*forward, *ignore)}
    for sig in forward:
        signal.signal(sig, passed_on)
    for sig in ignore:
        signal.signal(sig, signal.SIG_IGN)
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code if code >= 0 else 128 - code
