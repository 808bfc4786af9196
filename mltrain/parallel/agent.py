"""A parallel job's agent on one node: `max_concurrency_per_instance` worker processes
(mltrain/parallel/worker.py), each fed mini-batches from the shared queue
(mltrain.parallel.work_queue), as Azure's per-node agent runs its processes.

A worker whose `run()` raises, that runs past the timeout (it is killed: Python cannot interrupt native
code), or that dies (killed, out of memory) fails that attempt; the mini-batch goes back on the queue
until it has run `max_retries + 1` times, then counts against the thresholds. A dead or killed worker is
replaced, and the new one runs `init()` again. `init()` failing stops the job: every mini-batch would fail.

Each worker holds the mini-batch it runs and the next one (DEPTH), so it never waits for the agent between two:
with small mini-batches the round trip through the agent would otherwise be a worker's idle time. A mini-batch
that waited behind one whose worker died goes back on the queue without counting as an attempt.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from mltrain.parallel.work_queue import TOUCH_S, Queue

WORKER = str(Path(__file__).resolve().parent / "worker.py")
#: Mini-batches a worker holds: the one it runs and the next.
DEPTH = 2


@dataclass
class Settings:
    python: str
    entry_script: str
    arguments: List[str]
    concurrency: int
    max_retries: int
    timeout_s: float
    first_process: int  # this node's first worker's number in the job (process000, process001, ...)
    logs: Path
    env: Dict[str, str] = field(default_factory=dict)


class Worker:
    def __init__(self, number: int, settings: Settings, queue: Queue) -> None:
        self.number = number
        host = socket.gethostname()
        out_dir, err_dir = settings.logs / "stdout" / host, settings.logs / "stderr" / host
        out_dir.mkdir(parents=True, exist_ok=True)
        err_dir.mkdir(parents=True, exist_ok=True)
        to_worker, self._in = os.pipe()
        self._out, from_worker = os.pipe()
        env = dict(os.environ, **settings.env, MLTRAIN_PARALLEL_DIR=str(queue.root),
                   MLTRAIN_PARALLEL_ENTRY=settings.entry_script,
                   MLTRAIN_PARALLEL_ARGS=json.dumps(settings.arguments), MLTRAIN_PARALLEL_PROCESS=str(number))
        with open(out_dir / f"process{number:03d}.stdout.txt", "ab") as out, \
                open(err_dir / f"process{number:03d}.stderr.txt", "ab") as err:
            self.proc = subprocess.Popen([settings.python, WORKER, str(to_worker), str(from_worker)],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env,
                                         pass_fds=(to_worker, from_worker))
        os.close(to_worker)
        os.close(from_worker)
        self._buffer = b""
        self._asked = False
        self.ready = False
        self.inflight: List[int] = []  # sent, in order; the first is running
        self.started = 0.0  # when the first began

    @property
    def fd(self) -> int:
        return self._out

    @property
    def batch(self) -> Optional[int]:
        """The mini-batch this worker runs now."""
        return self.inflight[0] if self.inflight else None

    def finished(self) -> None:
        self.inflight.pop(0)
        self.started = time.monotonic()

    def send(self, index: int, batch: Dict[str, Any]) -> None:
        """Hand the worker a mini-batch; BrokenPipeError when it has died (its end is read from its pipe next)."""
        os.write(self._in, (json.dumps({"index": index, "batch": batch}) + "\n").encode())
        if not self.inflight:
            self.started = time.monotonic()
        self.inflight.append(index)

    def messages(self) -> List[Dict[str, Any]]:
        chunk = os.read(self._out, 65536)
        if not chunk:
            return [{"eof": True}]
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def ask_to_stop(self) -> None:
        """Tell the worker to run shutdown() and end (once: a second ask finds its pipe closed or ignored)."""
        if self._asked:
            return
        self._asked = True
        try:
            os.write(self._in, b'{"shutdown": true}\n')
        except OSError:
            pass

    def stop(self, grace_s: float = 5.0) -> None:
        self.ask_to_stop()
        try:
            self.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.close()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.close()

    def close(self) -> None:
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass


def _exit_text(code: Optional[int]) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


class Agent:
    def __init__(self, settings: Settings, queue: Queue, on_event: Callable[[bool], None] = lambda failure: None) -> None:
        self.settings = settings
        self.queue = queue
        # after every mini-batch, True when something failed in it (the thresholds are checked then)
        self.on_event = on_event
        self.workers: List[Worker] = []
        self._touched = time.monotonic()

    def _start(self, number: int) -> Worker:
        return Worker(number, self.settings, self.queue)

    def run(self) -> None:
        first = self.settings.first_process
        self.workers = [self._start(first + k) for k in range(self.settings.concurrency)]
        try:
            self._loop()
        finally:
            for worker in self.workers:  # all asked first: they end (shutdown(), the interpreter's exit) side by side
                worker.ask_to_stop()
            for worker in self.workers:
                worker.stop()

    def _loop(self) -> None:
        exhausted = False
        while True:
            if self.queue.aborted():
                return
            for worker in self.workers:
                while worker.ready and len(worker.inflight) < DEPTH and not exhausted:
                    index = self.queue.claim_next()
                    if index is None:
                        exhausted = True
                        break
                    try:
                        worker.send(index, self.queue.batches[index])
                    except BrokenPipeError:  # it died a moment ago: the mini-batch never reached it
                        self.queue.release(index)
                        break
            busy = [w for w in self.workers if w.batch is not None or not w.ready]
            if exhausted and not any(w.batch is not None for w in self.workers):
                if not self.queue.unfinished():
                    return
                exhausted = False
                time.sleep(0.5)  # others still work: a retry they release, or a lost agent's claim going stale
                continue
            readable, _, _ = select.select([w.fd for w in busy], [], [], 0.5) if busy else ([], [], [])
            for worker in list(self.workers):
                if worker.fd in readable:
                    for message in worker.messages():
                        self._handle(worker, message)
            self._check_timeouts()
            if time.monotonic() - self._touched > TOUCH_S:
                self.queue.touch([i for w in self.workers for i in w.inflight])
                self._touched = time.monotonic()

    def _handle(self, worker: Worker, message: Dict[str, Any]) -> None:
        if message.get("ready"):
            worker.ready = True
        elif "init_error" in message:
            self.queue.abort(f"init() of the entry script failed: {message['init_error']} "
                             f"(logs/user/stderr/, process{worker.number:03d})")
        elif "done" in message:
            worker.finished()
            missing = int(message["items"]) - int(message["returned"])
            if missing > 0:  # Azure: an item run() returns no row for has failed
                self.queue.short(int(message["done"]), missing)
            self.on_event(missing > 0)
        elif "error" in message:
            self._attempt_failed(worker.batch, message.get("message", "run() failed"))
            worker.finished()
        elif message.get("eof"):
            self._replace(worker, f"worker process{worker.number:03d} {_exit_text(worker.proc.wait())}")

    def _check_timeouts(self) -> None:
        for worker in list(self.workers):
            if worker.batch is not None and time.monotonic() - worker.started > self.settings.timeout_s:
                worker.kill()
                self._replace(worker, f"timed out after {self.settings.timeout_s:g} s "
                                      f"(retry_settings.timeout); worker process{worker.number:03d} killed")

    def _replace(self, worker: Worker, why: str) -> None:
        if worker.batch is not None:
            self._attempt_failed(worker.batch, why)
            for waiting in worker.inflight[1:]:  # never started: back on the queue, no attempt counted
                self.queue.release(waiting)
        elif not worker.ready and not self.queue.aborted():
            self.queue.abort(f"worker process{worker.number:03d} {why.split(' ', 2)[-1]} before init() finished "
                             "(logs/user/stderr/)")
        worker.close()
        # the replacement keeps the slot's number: its log goes on in the same files
        self.workers[self.workers.index(worker)] = self._start(worker.number)

    def _attempt_failed(self, index: Optional[int], error: str) -> None:
        if index is None:
            return
        errors = self.queue.attempt_failed(index, error)
        if len(errors) > self.settings.max_retries:
            self.queue.give_up(index, errors)
        else:
            self.queue.release(index)
        self.on_event(True)
