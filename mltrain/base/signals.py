"""Signals that set a threading.Event, safely.

A Python signal handler runs in the main thread between two of its bytecodes, even while that thread
holds a lock. Event.set() takes the event's lock: a second SIGTERM arriving inside the first one's
set() (a sweep step's driver gets two at once, one sent to its process group and one forwarded by the
step's program) ran set() again in the same thread and deadlocked it, so the sweep never stopped its
trials. So the handler here only writes a byte to a pipe, which takes no lock; a thread of its own
reads the pipe and sets the event.
"""
from __future__ import annotations

import os
import signal
import threading
from types import FrameType
from typing import Dict, Iterable, Optional

_SIGNAL, _STOP = b"s", b"e"


class SignalsSetEvent:
    """While in use, `signals` set `event` instead of their default action (main thread only; elsewhere a
    no-op, as signal.signal allows only the main thread). `signum` is the last signal taken."""

    def __init__(self, event: threading.Event, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self.event = event
        self.signals = tuple(signals)
        self.signum: Optional[int] = None
        self._old: Dict[int, object] = {}
        self._pipe: Optional[tuple] = None
        self._reader: Optional[threading.Thread] = None

    def install(self) -> SignalsSetEvent:
        if threading.current_thread() is not threading.main_thread():
            return self
        read, write = os.pipe()
        os.set_blocking(write, False)  # a handler never blocks, whatever comes
        self._pipe = (read, write)
        self._reader = threading.Thread(target=self._read, args=(read,), name="signals-set-event", daemon=True)
        self._reader.start()
        for sig in self.signals:
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)  # type: ignore[arg-type]  # what signal.signal gave back
        self._old = {}
        if self._pipe is not None and self._reader is not None:
            read, write = self._pipe
            os.set_blocking(write, True)
            os.write(write, _STOP)
            self._reader.join()
            os.close(read)
            os.close(write)
            self._pipe, self._reader = None, None

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        self.signum = signum
        if self._pipe is not None:
            try:
                os.write(self._pipe[1], _SIGNAL)
            except BlockingIOError:  # the pipe is full of signals not read yet: the event is being set
                pass

    def _read(self, read: int) -> None:
        while True:
            byte = os.read(read, 1)
            if byte != _SIGNAL:
                return
            self.event.set()

    def __enter__(self) -> SignalsSetEvent:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()
