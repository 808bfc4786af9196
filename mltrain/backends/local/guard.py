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

A rank the driver started but had not yet named when it died (killed between starting the process
and writing its group to the pipe) is found by the mark every rank carries in its environment
(MARK=<token>, a token of this guard's own): on end of file the guard looks through /proc for
processes holding it, and keeps looking for a second, since a rank forked before the death may only
then have started its program.

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


#: The environment variable every rank of a guarded run carries (its value: the guard's token).
MARK = "MLTRAIN_GUARD"
#: How long after the driver's death processes holding the mark are still looked for.
LOOK_S = 1.0


def unmarked(env: dict[str, str]) -> dict[str, str]:
    """`env` without the mark: for a process a rank starts to outlive its run (a submitted run's driver,
    the MLflow mirror, a guard of its own)."""
    return {k: v for k, v in env.items() if k != MARK}


def marked(token: str) -> set[int]:
    """The process groups of the processes whose environment holds MARK=token (none where there is no /proc)."""
    want, own = f"{MARK}={token}".encode(), os.getpgrp()
    out: set[int] = set()
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if want not in f.read().split(b"\0"):
                    continue
            pgid = os.getpgid(pid)
        except OSError:  # gone, or not ours to read
            continue
        if pgid != own:
            out.add(pgid)
    return out


def stop(groups: list[int], grace_s: float, token: str = "") -> None:
    now = time.monotonic()
    deadline, look_until = now + grace_s, now + (LOOK_S if token else 0)
    told: set[int] = set()
    while True:
        fresh = (set(groups) | (marked(token) if token and time.monotonic() <= look_until else set())) - told
        for pgid in fresh:
            _signal(pgid, signal.SIGTERM)
        told |= fresh
        alive = any(_group_alive(g) for g in told)
        if time.monotonic() >= deadline or (not alive and time.monotonic() > look_until):
            break
        time.sleep(0.05)
    for pgid in told:
        _signal(pgid, signal.SIGKILL)


def main() -> None:
    grace_s = float(sys.argv[1])
    token = sys.argv[2] if len(sys.argv) > 2 else ""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver is the driver's to handle
    groups: list[int] = []
    for line in sys.stdin:
        word = line.strip()
        if word == "done":
            return
        if word.isdigit():
            groups.append(int(word))
    stop(groups, grace_s, token)


if __name__ == "__main__":
    main()
