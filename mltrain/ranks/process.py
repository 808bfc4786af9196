"""Running a rank's program as a child process: its output copied to its log and handed on, its
exit described in words, and the one way mltrain stops process groups (SIGTERM, a grace period,
then SIGKILL for the whole group)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from collections import deque
from typing import Callable, Deque, List, Optional, Sequence

from mltrain.runs.waiting import wait_until

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


class LogCopy:
    """What copying a rank's output left behind: its last lines (kept in memory, so they survive a log
    that could not be written) and the write error that stopped the log, if one did."""

    def __init__(self, keep: int = TAIL_LINES) -> None:
        self.last: Deque[str] = deque(maxlen=keep)
        self.write_error: Optional[OSError] = None
        self.log_path = ""

    def problem(self) -> str:
        """One clause for the run's error when the log could not be written, else ''."""
        exc = self.write_error
        if exc is None:
            return ""
        folder = os.path.dirname(self.log_path) or "."
        try:
            free = f", {shutil.disk_usage(folder).free} bytes free"
        except OSError:
            free = ""
        return f"its log {self.log_path} could not be written ({exc.strerror}{free}); its last lines were kept in memory"

    def tail(self) -> str:
        return "\n".join(self.last)


def copy_output(stream, log_path, on_chunk=None, on_line=None, copy: Optional[LogCopy] = None) -> LogCopy:
    """Copy a rank's output to its log as it comes, and hand it on in chunks or in whole lines.

    Chunks pass partial lines and '\r' redraws through (a live progress bar), and end with a line end
    (one is added when the rank's last line had none, so what follows starts a line of its own); whole
    lines wait for their end, or for the rank's end. The log keeps only
    what each line ends as (no bar frames, no terminal escapes). A log that cannot be written (a full
    disk) stops being written, never being read: the rank must not block on a pipe nobody empties,
    and its last lines are kept in memory (the returned LogCopy) for the run's error.
    """
    copy = copy if copy is not None else LogCopy()
    copy.log_path = str(log_path)
    fd = stream.fileno()
    pending = b""
    ended = True  # the chunks so far end a line
    log = _open_log(log_path, copy)
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            if on_chunk is not None:
                on_chunk(chunk)
                ended = chunk.endswith(b"\n")
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                log = _write_line(log, _final_frame(line), copy)
                if on_line is not None:
                    on_line(line.decode("utf-8", "replace"))
        if pending:
            log = _write_line(log, _final_frame(pending), copy)
            if on_line is not None:
                on_line(pending.decode("utf-8", "replace"))
        if on_chunk is not None and not ended:
            on_chunk(b"\n")
    finally:
        if log is not None:
            try:
                log.close()
            except OSError:
                pass
        stream.close()
    return copy


def _open_log(log_path, copy: LogCopy):
    try:
        return open(log_path, "ab", buffering=0)
    except OSError as exc:
        copy.write_error = exc
        return None


def _write_line(log, line: bytes, copy: LogCopy):
    """The line into the log while it takes lines; kept in memory either way. Returns the log, or None
    once a write failed."""
    copy.last.append(line.decode("utf-8", "replace"))
    if log is None:
        return None
    try:
        log.write(line + b"\n")
        return log
    except OSError as exc:
        copy.write_error = exc
        try:
            log.close()
        except OSError:
            pass
        return None


def run_program(argv: List[str], cwd: str, env: dict, log_path, on_start=None, on_chunk=None, on_line=None,
                new_session: bool = False) -> int:
    """Run one rank's program as a child of a rank wrapper (a Slurm task, an mpirun rank), its output
    copied to log_path and handed on; returns its exit code. on_start gets the process (signals).
    `new_session`: the program and all it starts are one process group, which one signal stops (a packed
    member stopped while its worker goes on: mltrain.backends.slurm.pack)."""
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=new_session)
    pump = threading.Thread(target=copy_output, args=(proc.stdout, log_path),
                            kwargs={"on_chunk": on_chunk, "on_line": on_line}, daemon=True)
    # a wrapper that ends the task from a signal handler (a Slurm requeue) joins it first, so the
    # program's last lines reach its log
    proc.pump = pump  # type: ignore[attr-defined]
    if on_start is not None:
        on_start(proc)
    pump.start()
    code = proc.wait()
    pump.join(timeout=10)
    return code


class ForkedChild:
    """A rank program run as a fork of this process (no new interpreter), with the part of
    subprocess.Popen's interface the rank wrappers use: pid, poll, wait, send_signal, terminate."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by a wait() of another thread, which sets returncode
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        if timeout is None and self.returncode is None:  # blocks in the kernel: no polling on a busy node
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:  # reaped by a poll() of another thread meanwhile
                pass
        if not wait_until(lambda: self.poll() is not None, timeout, poll=0.01):
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def run_forked(target: Callable[[], None], cwd: str, env: dict, log_path, on_start=None, on_chunk=None,
               on_line=None, new_session: bool = False) -> int:
    """run_program for a Python callable: the child is a fork of this process, so what this process
    has imported is not imported again. The child gets `env` and `cwd`, default signal handlers and its
    output on a pipe copied like a program's; its exit code is the callable's sys.exit code (0 when it
    returns, 1 on an uncaught exception, whose traceback goes to the log)."""
    read_fd, write_fd = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    # an ignored signal stays ignored, as it would through exec (the Slurm wrapper ignores USR2 for its program)
    ignored = [sig for sig in (signal.SIGUSR2,) if signal.getsignal(sig) == signal.SIG_IGN]
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            if new_session:
                os.setsid()
            os.close(read_fd)
            os.dup2(write_fd, 1)
            os.dup2(write_fd, 2)
            os.close(write_fd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
            os.environ.clear()
            os.environ.update(env)
            os.chdir(cwd)
            target()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: B036 - the child must always end with an exit code
            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)
    os.close(write_fd)
    child = ForkedChild(pid)
    pump = threading.Thread(target=copy_output, args=(os.fdopen(read_fd, "rb"), log_path),
                            kwargs={"on_chunk": on_chunk, "on_line": on_line}, daemon=True)
    child.pump = pump  # type: ignore[attr-defined]
    if on_start is not None:
        on_start(child)
    pump.start()
    code = child.wait()
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
    wait_until(lambda: all(p.poll() is not None for p in alive), grace_s, poll=POLL_S)
    for p in alive:
        if p.poll() is None and on_kill is not None:
            on_kill(p)
        # The group may hold children that outlived the process itself.
        signal_group(p, signal.SIGKILL)
    for p in alive:
        p.wait()
    return alive
