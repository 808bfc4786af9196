"""gunicorn's workers for a deployment's server: the sync worker Azure's server runs (gthread when a worker takes
concurrent requests), each also listening on the endpoint's port with sockets of its own, as many as its
deployment's share of the traffic calls for (balance.py), re-balanced when the endpoint's record changes.

The master listens on the deployment's private port only (probes, and requests that name another deployment).
A worker opens its endpoint sockets once its app is loaded, so the port's group never holds a socket nobody can
accept on yet, and a worker that ends takes its sockets out of the group with it.
"""
from __future__ import annotations

import errno
import json
import os
import select
import selectors
import sys
from pathlib import Path
from typing import Any, List, Optional

from gunicorn.sock import TCP6Socket, TCPSocket
from gunicorn.workers.gthread import ThreadWorker
from gunicorn.workers.sync import StopWaiting, SyncWorker

from mltrain.endpoints import balance
from mltrain.endpoints.endpoint_record import ENDPOINT_FILE

#: how often an idle worker looks at the endpoint's record; a command that changes it wakes the workers at once
#: (balance.nudge), so this only bounds how late a worker that missed the nudge (still starting) catches up
LOOK_S = 1.0
#: gunicorn's exit status for a worker that cannot boot: its master then stops, instead of starting it again
BOOT_ERROR = 3
_GONE = (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return 0


class _Balanced:
    """The endpoint sockets of one worker: opened, and drained then closed, as the plan for its deployment says."""

    # gunicorn's worker's, and the subclass's (annotations only: the methods come from later in the MRO)
    sockets: List[Any]
    cfg: Any
    log: Any
    accept: Any
    _added: Any
    _removed: Any

    def _start_balancing(self) -> None:
        self._folder = Path(os.environ["MLTRAIN_ENDPOINT_DIR"])
        self._deployment = os.environ["MLTRAIN_DEPLOYMENT"]
        self._record = str(self._folder / ENDPOINT_FILE)
        endpoint = json.loads(Path(self._record).read_text())
        self._address = (str(endpoint["host"]), int(endpoint["port"]))
        self._kind = TCP6Socket if ":" in self._address[0] else TCPSocket
        self._own: List[Any] = []
        self._seen = -1
        error = self._rebalance()
        if error is not None:  # the endpoint's port taken by another program: the server cannot serve it
            print(f"EndpointError: {error}", flush=True)
            sys.exit(BOOT_ERROR)

    def _rebalance(self) -> Optional[str]:
        stamp = _mtime(self._record)
        if stamp == self._seen:
            return None
        try:
            want = balance.plan(self._folder).get(self._deployment, 0)
        except (OSError, ValueError):  # the endpoint deleted under it: its server is being stopped
            return None
        self._seen = stamp
        while len(self._own) < want:
            try:
                sock = self._kind(self._address, self.cfg, self.log)
            except OSError as exc:
                self._seen = -1  # tried again at the next look
                return (f"port {self._address[1]} on {self._address[0]} is in use by another program "
                        f"({exc.strerror})")
            self._own.append(sock)
            self._added(sock)
        while len(self._own) > want:
            sock = self._own.pop()
            self._removed(sock)
            self._drain(sock)
            sock.close()
        return None

    def _drain(self, sock: Any) -> None:
        """The connections waiting on a socket about to close, accepted first: closing a listening socket resets
        those still queued on it (Linux does not move them to the group's other sockets unless the machine's
        net.ipv4.tcp_migrate_req is set). What may still arrive between the last look and the close is the time of
        two system calls."""
        while select.select([sock], [], [], 0)[0]:
            try:
                self.accept(sock)
            except OSError as exc:
                if exc.errno not in _GONE:
                    raise



class EndpointSyncWorker(_Balanced, SyncWorker):  # type: ignore[misc]  # gunicorn ships no types
    """gunicorn's sync worker, its loop (run_for_multiple's) also re-balancing after each wake."""

    def _added(self, sock: Any) -> None:
        sock.setblocking(False)
        self.sockets.append(sock)
        self.wait_fds = self.sockets + [self.PIPE[0]]

    def _removed(self, sock: Any) -> None:
        self.sockets.remove(sock)
        self.wait_fds = self.sockets + [self.PIPE[0]]

    def run(self) -> None:
        for sock in self.sockets:
            sock.setblocking(False)
        self._start_balancing()
        timeout = min(self.timeout or 0.5, LOOK_S)
        while self.alive:
            self.notify()
            try:
                ready = self.wait(timeout)
            except StopWaiting:
                return
            for listener in ready or ():
                if listener == self.PIPE[0]:
                    continue
                try:
                    self.accept(listener)
                except OSError as exc:
                    if exc.errno not in _GONE:
                        raise
            self._rebalance()
            if not self.is_parent_alive():
                return


class EndpointThreadWorker(_Balanced, ThreadWorker):  # type: ignore[misc]  # gunicorn ships no types
    """gunicorn's gthread worker (a deployment's max_concurrent_requests_per_instance above 1)."""

    def _added(self, sock: Any) -> None:
        self.sockets.append(sock)
        if self._accepting:
            self.poller.register(sock, selectors.EVENT_READ, self.accept)

    def _removed(self, sock: Any) -> None:
        self.sockets.remove(sock)
        if self._accepting:
            self.poller.unregister(sock)

    def run(self) -> None:
        self._start_balancing()
        super().run()

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        super().wait_for_and_dispatch_events(min(timeout, LOOK_S))
        if self.alive:
            self._rebalance()

    def handle_winch(self, sig: int, frame: Any) -> None:
        """balance.nudge: its poller is not woken by a signal (gunicorn's wake-up pipe is the sync worker's)."""
        self.method_queue.defer(lambda: None)
