"""The mini-batch queue of a parallel job: a folder in the run's folder that every agent shares (the run's
folder is on the filesystem every node sees, as Slurm's ranks already meet there).

    parallel/batches.json     every mini-batch, written once by rank 0 (the others wait for it)
    parallel/claims/<i>       taken by one agent (O_EXCL); touched while it runs; removed to run it again (a run
                              of one instance keeps its claims in its agent's memory: no other agent can take one)
    parallel/done/<w>.jsonl   the rows of every mini-batch worker <w> ran, a line each (appended whole: a file
                              made per mini-batch cost more than a small mini-batch's scoring)
    parallel/failed/<i>.json  given up on after its retries: the errors of each attempt
    parallel/attempts/<i>.json  the errors of the attempts so far (written only by the claim's holder)
    parallel/short/<i>        how many items its run() returned no row for (Azure counts them as failed)
    parallel/abort            a threshold was crossed, or init() failed: no agent takes another mini-batch
    parallel/launch           which launch of the run the queue is ready for (rank 0 writes it; the others wait)

A mini-batch runs once unless it fails (then again, up to the retries) or its agent is lost: a claim that
nobody has touched for `stale_s` is taken over, so a lost node's work is done by the others.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Set

from mltrain.base.atomic import atomic_write

#: A claim untouched this long belongs to a lost agent (agents touch theirs every TOUCH_S).
STALE_S = 60.0
TOUCH_S = 5.0


class Queue:
    def __init__(self, root: Path, agent: str, stale_s: float = STALE_S, alone: bool = False) -> None:
        self.root = Path(root)
        self.agent = agent
        self.stale_s = stale_s
        self._batches: Optional[List[Dict[str, Any]]] = None
        self._cursor = 0
        # `alone`: the run's only agent (one instance), which no other can take a mini-batch from or over: its
        # claims are kept here, not as a file each (making 1,000 files cost 0.18 s of system time on the build
        # machine's ext4, a third of what a parallel job spent per mini-batch over a multiprocessing.Pool)
        self.alone = alone
        self._held: Optional[Set[int]] = None  # an agent alone: the mini-batches taken (done ones from the start)
        self._done: Dict[int, Dict[str, Any]] = {}  # the mini-batches done, read from the workers' logs so far
        self._offsets: Dict[str, int] = {}  # each log's length read

    # ---------------------------------------------------------------------------------- the batches
    def publish(self, batches: List[Dict[str, Any]]) -> None:
        for sub in ("claims", "done", "failed", "attempts", "short"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        atomic_write(self.root / "batches.json", json.dumps(batches))
        self._batches = batches

    def published(self) -> bool:
        return (self.root / "batches.json").is_file()

    def recover(self) -> int:
        """Rank 0 of a later launch of the same run (`runs resume`, a Slurm requeue): the mini-batches done stay
        done; every other one is put back with its attempts forgotten, a given-up one too. Returns how many
        were done."""
        done = set(self.names("done"))
        for index in range(len(self.batches)):
            if index not in done:
                for path in (f"claims/{index}", f"attempts/{index}.json", f"failed/{index}.json", f"short/{index}"):
                    (self.root / path).unlink(missing_ok=True)
        (self.root / "abort").unlink(missing_ok=True)
        return len(done)

    def open_launch(self, launch: str) -> None:
        """Rank 0 says the queue is ready for this launch of the run; the other agents wait for it."""
        atomic_write(self.root / "launch", launch)

    def launch_open(self, launch: str) -> bool:
        try:
            return (self.root / "launch").read_text() == launch
        except FileNotFoundError:
            return False

    @property
    def batches(self) -> List[Dict[str, Any]]:
        if self._batches is None:
            self._batches = json.loads((self.root / "batches.json").read_text())
        return self._batches

    # ---------------------------------------------------------------------------------- claims
    def claim_next(self) -> Optional[int]:
        """The next mini-batch nobody holds, in input order; a stale claim of a lost agent is taken over
        once every other one is taken."""
        total = len(self.batches)
        while self._cursor < total:
            index = self._cursor
            self._cursor += 1
            if self._take(index):
                return index
        if self.alone:  # no other agent's claim to take over; its own failed ones came back through release()
            return None
        for index in self.unfinished():
            claim = self.root / "claims" / str(index)
            try:
                age = time.time() - claim.stat().st_mtime
            except FileNotFoundError:  # released for a retry by its holder after our scan passed it
                age = float("inf")
            if age > self.stale_s:
                # rename is atomic: of two agents taking over one stale claim, one wins
                try:
                    os.replace(claim, self.root / "claims" / f".{index}.lost.{self.agent}")
                except FileNotFoundError:
                    pass
                if self._take(index, taken_over=True):
                    return index
        return None

    def _take(self, index: int, taken_over: bool = False) -> bool:
        if self.alone:
            if self._held is None:  # a resumed run's mini-batches done are never taken again
                self._held = set(self.names("done"))
            if index in self._held:
                return False
            self._held.add(index)
            return True
        try:
            fd = os.open(self.root / "claims" / str(index), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        os.write(fd, self.agent.encode())
        os.close(fd)
        # A claim stays once its mini-batch is over, so only a claim taken over may find it over: finished by
        # the agent whose claim went stale, after all
        if taken_over and (index in self._read_done() or (self.root / "failed" / f"{index}.json").exists()):
            return False
        return True

    def touch(self, indices: List[int]) -> None:
        if self.alone:
            return
        for index in indices:
            try:
                os.utime(self.root / "claims" / str(index))
            except FileNotFoundError:
                pass

    def release(self, index: int) -> None:
        """Put a failed mini-batch back for another attempt (by this agent or any other)."""
        self._cursor = min(self._cursor, index)
        if self._held is not None:
            self._held.discard(index)
            return
        try:
            os.unlink(self.root / "claims" / str(index))
        except FileNotFoundError:
            pass

    # ---------------------------------------------------------------------------------- outcomes
    def attempts(self, index: int) -> List[str]:
        path = self.root / "attempts" / f"{index}.json"
        return json.loads(path.read_text()) if path.is_file() else []

    def attempt_failed(self, index: int, error: str) -> List[str]:
        errors = self.attempts(index) + [error]
        atomic_write(self.root / "attempts" / f"{index}.json", json.dumps(errors))
        return errors

    def give_up(self, index: int, errors: List[str]) -> None:
        atomic_write(self.root / "failed" / f"{index}.json",
                     json.dumps({"errors": errors, "items": self.batches[index]["items"]}))

    def short(self, index: int, missing: int) -> None:
        """A mini-batch whose run() returned fewer rows than it had items: that many items failed."""
        atomic_write(self.root / "short" / str(index), str(missing))

    def missing_items(self) -> int:
        return sum(int((self.root / "short" / str(i)).read_text()) for i in self.names("short"))

    def names(self, sub: str) -> List[int]:
        if sub == "done":
            return list(self._read_done())
        try:
            return [int(n.split(".")[0]) for n in os.listdir(self.root / sub) if not n.startswith(".")]
        except FileNotFoundError:
            return []

    def _read_done(self) -> Dict[int, Dict[str, Any]]:
        """Every mini-batch done, from its worker's log (`done/<worker>.jsonl`: one line each, appended whole by
        the one worker that writes it; a line its worker died writing has no end and is not done), read on from
        where the last look stopped; `done/<i>.json` is a run's from before the logs. Of two agents that both
        finished one whose claim went stale, the first line read stands."""
        try:
            names = os.listdir(self.root / "done")
        except FileNotFoundError:
            return self._done
        for name in names:
            if name.startswith("."):
                continue
            path = self.root / "done" / name
            if name.endswith(".jsonl"):
                offset = self._offsets.get(name, 0)
                with open(path, "rb") as f:
                    f.seek(offset)
                    chunk = f.read()
                whole = chunk[:chunk.rfind(b"\n") + 1]
                self._offsets[name] = offset + len(whole)
                for line in whole.splitlines():
                    entry = json.loads(line)
                    self._done.setdefault(int(entry.pop("index")), entry)
            elif int(name.split(".")[0]) not in self._done:
                self._done[int(name.split(".")[0])] = json.loads(path.read_text())
        return self._done

    def unfinished(self) -> List[int]:
        over = set(self.names("done")) | set(self.names("failed"))
        return [i for i in range(len(self.batches)) if i not in over]

    def done(self, index: int) -> Dict[str, Any]:
        """A mini-batch done: its items and rows."""
        return self._done[index] if index in self._done else self._read_done()[index]

    def failed(self, index: int) -> Dict[str, Any]:
        found: Dict[str, Any] = json.loads((self.root / "failed" / f"{index}.json").read_text())
        return found

    # ---------------------------------------------------------------------------------- stopping
    def abort(self, reason: str) -> None:
        try:
            fd = os.open(self.root / "abort", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return  # the first reason stands
        os.write(fd, reason.encode())
        os.close(fd)

    def aborted(self) -> Optional[str]:
        try:
            return (self.root / "abort").read_text()
        except FileNotFoundError:
            return None
