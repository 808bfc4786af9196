"""What the driver shows: its own status lines and the ranks' output, never interleaved mid-line."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import BinaryIO, Callable, Optional, TextIO, Tuple


class Silent:
    """A stream that keeps nothing: the console of a front end that prints nothing when it submits (Azure's
    SDKs), whose runs' own logs keep every line."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


class Console:
    def __init__(self, prefix: str = "", stream: Optional[TextIO] = None) -> None:
        self.prefix = prefix
        self._stream = stream
        self._lock = _LOCK

    @property
    def stream(self) -> TextIO:
        # looked up at each write: sys.stdout may be replaced after the console is made (pytest's capture)
        return self._stream or sys.stdout

    def status(self, text: str) -> None:
        self.write_line(f"mltrain: {self.prefix}{text}")

    def rank_output(self, rank: int, whole_lines: bool) -> Tuple[Optional[Callable[[bytes], None]],
                                                                Optional[Callable[[str], None]]]:
        """(on_chunk, on_line) for a shown rank. Rank 0 of a lone run passes through as written, so a
        progress bar redraws, unless `whole_lines` (other ranks share the console, or what is read may end
        mid-line: a log's tail). Anything else goes whole line by line, each with its member and rank prefix,
        so ranks and concurrent runs never mix within a line: a part of a line is held until its end comes."""
        if rank == 0 and not self.prefix and not whole_lines:
            return self.raw, None
        return None, self.rank_lines(rank)

    def rank_lines(self, rank: int) -> Callable[[str], None]:
        """Shows one whole line of a rank, with its member and rank prefix (rank 0 has none)."""
        label = self.prefix + (f"[rank {rank}] " if rank else "")
        return lambda line: self.write_line(label + line)

    def is_terminal(self) -> bool:
        try:
            return self.stream.isatty()
        except (AttributeError, ValueError):
            return False

    def raw(self, data: bytes) -> None:
        """Bytes as a rank wrote them (rank 0): partial lines and '\r' redraws pass through."""
        with self._lock:
            # a stream standing in for stdout (io.StringIO) has no binary buffer beneath it
            buffer: Optional[BinaryIO] = getattr(self.stream, "buffer", None)
            if buffer is not None:
                buffer.write(data)
            else:
                self.stream.write(data.decode("utf-8", "replace"))
            self.stream.flush()

    def write_line(self, text: str) -> None:
        with self._lock:
            self.stream.write(text.rstrip("\n") + "\n")
            self.stream.flush()


# One lock for every console in the process: concurrent sweep members share the terminal.
_LOCK = threading.Lock()


class RunLog:
    """The launcher's own log of one run (logs/launcher.log)."""

    def __init__(self, path: Path, console: Optional[Console] = None) -> None:
        self.path = path
        self.console = console
        self._lock = threading.Lock()

    def info(self, text: str, show: bool = False) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            with self._lock, open(self.path, "a", encoding="utf-8") as f:
                for line in text.splitlines() or [""]:
                    f.write(f"[{stamp}] {line}\n")
        except OSError:
            # A full disk: the launcher's log is a convenience; run.json (with its reserve) keeps the
            # status and the error, and the console still says it.
            pass
        if show and self.console is not None:
            self.console.status(text)
