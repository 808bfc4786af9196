"""A run handed to its backend: what `Backend.submit` returns at once, and what the engine's wait loop asks.

TorchX's shape (`Scheduler.submit` returns an app handle; `describe` and `cancel` take it): a sweep, a
pipeline or a resumed sweep hands each run to its backend with `submit(plan, record, console)` and gets a
Submission back as soon as the run is on its way; its one wait loop (`mltrain.runs.waiting.wait_until`)
then asks every Submission in flight `describe()` and, when the sweep's policy or the pipeline says so,
`cancel(reason)`. No feature starts threads or follows a backend of its own.

Two kinds:
- `Supervised`: a run this process drives to its end: the backend's `launch` (which starts the ranks and
  follows them: the local backend is the ranks' supervisor, the Slurm backend submits and follows the job)
  in a thread of its own, so `submit` returns at once.
- `Followed`: a run going on without this process (a Slurm job whose driver was killed, found again by
  `runs resume`): its record and the backend's `refresh`, looked at no more often than the backend's
  poll interval, whoever asks and however often.
"""
from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, List, Optional, Protocol

from mltrain.base.errors import MltrainError
from mltrain.jobspec.status import FAILED, TERMINAL
from mltrain.runs.console import Console
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord


class Cancel(threading.Event):
    """The cancel request a backend's launch() watches, with why it was made: a sweep's
    early-termination policy says which rule stopped the run, and that reason is what its record keeps."""

    def __init__(self) -> None:
        super().__init__()
        self.reason = "canceled by the user"

    def request(self, reason: str) -> None:
        self.reason = reason
        self.set()


def cancel_reason(cancel: threading.Event) -> str:
    """Why the run is being canceled: a Cancel says; a plain Event (a command stopped by a signal) does not."""
    return cancel.reason if isinstance(cancel, Cancel) and cancel.reason else "canceled by the user"


class Driving(Protocol):
    """What a Submission needs of its backend (mltrain.backends.base.Backend has it)."""

    name: ClassVar[str]
    wait_poll_s: ClassVar[float]

    def launch(self, plans: List[Any], records: List[RunRecord], consoles: List[Console],
               cancel: threading.Event) -> List[str]: ...

    def refresh(self, records: List[RunRecord]) -> None: ...

    def cancel(self, record: RunRecord) -> None: ...


@dataclass(frozen=True)
class RunState:
    """A submitted run as its backend last saw it. `ended`: the backend is done with it, and `status`
    is final (its record says the same)."""

    status: str
    ended: bool
    error: Optional[str] = None


class Submission(ABC):
    """One run on its way: ask `describe()` until it has ended; `cancel(reason)` stops it (the reason is
    what its record keeps)."""

    def __init__(self, backend: Driving, record: RunRecord) -> None:
        self.backend, self.record = backend, record

    @abstractmethod
    def describe(self) -> RunState:
        """The run's state now; never blocks on the run."""

    @abstractmethod
    def cancel(self, reason: str) -> None:
        """Ask the backend to stop the run; `describe()` says when it has."""

    @property
    @abstractmethod
    def canceling(self) -> bool:
        """Whether a cancel has been asked for."""


class Supervised(Submission):
    """A run this process drives: the backend's launch in a thread of its own."""

    def __init__(self, backend: Driving, plan: Any, record: RunRecord, console: Console) -> None:
        super().__init__(backend, record)
        self._cancel = Cancel()
        self._final: Optional[RunState] = None
        self._thread = threading.Thread(target=self._drive, args=(plan, console), daemon=True,
                                        name=f"run-{record.id}")
        self._thread.start()

    def _drive(self, plan: Any, console: Console) -> None:
        try:
            status = self.backend.launch([plan], [self.record], [console], self._cancel)[0]
            self._final = RunState(status, True, self.record.doc.error)
        except Exception as exc:  # launch() records a failing run itself; this is mltrain's own fault, kept visible
            error = str(exc) if isinstance(exc, MltrainError) else f"internal error: {type(exc).__name__}: {exc}"
            try:
                self.record.reload()
                if self.record.status not in TERMINAL:
                    finish(self.record, FAILED, error=error, console=console)
            except MltrainError as again:  # the record cannot be written either (a full disk): said, not a traceback
                console.status(f"{FAILED}: {again}")
            self._final = RunState(FAILED, True, error)

    def describe(self) -> RunState:
        final = self._final
        if final is not None and not self._thread.is_alive():
            return final
        return RunState(self.record.status, False)

    def cancel(self, reason: str) -> None:
        self._cancel.request(reason)

    @property
    def canceling(self) -> bool:
        return self._cancel.is_set()


class Followed(Submission):
    """A run that goes on without this process: its record, brought up to date by its backend at most
    once per the backend's poll interval."""

    def __init__(self, backend: Driving, record: RunRecord) -> None:
        super().__init__(backend, record)
        self._asked = False
        self._looked = 0.0

    def describe(self) -> RunState:
        if self.record.status not in TERMINAL and time.monotonic() - self._looked >= self.backend.wait_poll_s:
            self._looked = time.monotonic()
            self.record.reload()
            self.backend.refresh([self.record])
        ended = self.record.status in TERMINAL
        return RunState(self.record.status, ended, self.record.doc.error if ended else None)

    def cancel(self, reason: str) -> None:
        if not self._asked and self.record.status not in TERMINAL:
            self._asked = True
            self.backend.cancel(self.record)

    @property
    def canceling(self) -> bool:
        return self._asked
