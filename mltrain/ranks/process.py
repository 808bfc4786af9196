"""Running a rank's program as a child process: its output copied to its log and handed on, its
exit described in words, and the one way mltrain stops process groups (SIGTERM, a grace period,
then SIGKILL for the whole group)."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from typing import Callable, List, Optional, Sequence

POLL_S = 0.05
TAIL_LINES = 15


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def tail(path, lines: int = TAIL_LINES) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def follow(path, offset: int) -> tuple:
    """(what was appended to a log since `offset`, the new offset): a reader streaming a rank's log."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return b"", offset
    return chunk, offset + len(chunk)


def copy_output(stream, log_path, on_chunk=None, on_line=None) -> None:
    """Copy a rank's output to its log as it comes, and hand it on in chunks or in whole lines.

    Chunks pass partial lines and '\r' redraws through (a live progress bar); the log keeps only
    what each line ends as (no bar frames, no terminal escapes).
    """
    fd = stream.fileno()
    pending = b""
    with open(log_path, "ab", buffering=0) as log:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if on_chunk is not None:
                on_chunk(chunk)
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                log.write(_final_frame(line) + b"\n")
                if on_line is not None:
                    on_line(line.decode("utf-8", "replace"))
        if pending:
            log.write(_final_frame(pending) + b"\n")
            if on_line is not None:
                on_line(pending.decode("utf-8", "replace"))
    stream.close()


def run_program(argv: List[str], cwd: str, env: dict, log_path, on_start=None, on_chunk=None, on_line=None) -> int:
    """Run one rank's program as a child of a rank wrapper (a Slurm task, an mpirun rank), its output
    copied to log_path and handed on; returns its exit code. on_start gets the process (signals)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    if on_start is not None:
        on_start(proc)
    pump = threading.Thread(target=copy_output, args=(proc.stdout, log_path),
                            kwargs={"on_chunk": on_chunk, "on_line": on_line}, daemon=True)
    pump.start()
    code = proc.wait()
    pump.join(timeout=10)
    return code


def _final_frame(line: bytes) -> bytes:
    return line.rsplit(b"\r", 1)[-1].replace(b"\x1b[K", b"")


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_groups(procs: Sequence[subprocess.Popen], grace_s: float,
                on_kill: Optional[Callable[[subprocess.Popen], None]] = None) -> List[subprocess.Popen]:
    """Stop processes started with start_new_session=True, and everything they started: SIGTERM to
    each group, SIGKILL after grace_s to those still alive and to any children left behind.
    Returns the processes that were still running (and so were stopped)."""
    alive = [p for p in procs if p.poll() is None]
    for p in alive:
        signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(p.poll() is None for p in alive):
        time.sleep(POLL_S)
    for p in alive:
        if p.poll() is None and on_kill is not None:
            on_kill(p)
        # The group may hold children that outlived the process itself.
        signal_group(p, signal.SIGKILL)
    for p in alive:
        p.wait()
    return alive
