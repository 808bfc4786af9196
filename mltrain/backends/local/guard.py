"""The guard of a local run's ranks: it stops them when their driver dies without doing so itself.

A local rank is the leader of its own process group (start_new_session: a Ctrl-C reaches only the
driver, and a rank's children go down with it), so nothing takes the ranks down when the driver is
killed with SIGKILL: they would run on as orphans. The guard is a separate small process, in its own
session, holding the read end of a pipe whose only write end is the driver's. The driver writes each
rank's process group as it starts it and `done` when it has stopped them itself; end of file without
`done` means the driver is gone (any death, SIGKILL included: the kernel closes its files), and the
guard stops every group the way the driver would (SIGTERM, kill_grace_s, SIGKILL).

Why not the parent-death signal (prctl PR_SET_PDEATHSIG) in each rank: it reaches the rank's own
process only, not the group (a `command` job's shell leaves its children running), it fires when the
*thread* that started the rank exits (the driver starts ranks from worker threads in a sweep), and
setting it needs a preexec_fn, which is unsafe in a driver that runs threads.

Run as a file (`python -I -S guard.py GRACE`), not as a module of the mltrain package: it needs only
the standard library, and starts in a few milliseconds.
"""
import os
import signal
import sys
import time


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop(groups: list[int], grace_s: float) -> None:
    for pgid in groups:
        _signal(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        time.sleep(0.05)
    for pgid in groups:
        _signal(pgid, signal.SIGKILL)


def main() -> None:
    grace_s = float(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver is the driver's to handle
    groups: list[int] = []
    for line in sys.stdin:
        word = line.strip()
        if word == "done":
            return
        if word.isdigit():
            groups.append(int(word))
    stop(groups, grace_s)


if __name__ == "__main__":
    main()
