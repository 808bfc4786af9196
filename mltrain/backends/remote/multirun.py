"""The laptop's side of a sweep or pipeline whose own driver runs on a remote cluster (issue 65; the command that sends
it: mltrain.command.remote_multirun).

The driver there (`python -m mltrain.cli.multirun REQUEST`, started by far_side `multirun`) lists each run it makes.
At each look this side relays the driver's log with this machine's paths, brings its outcome, its sweep folder's
sweep.json and summary.json, and mirrors each of its runs here as a remote run (mltrain.backends.remote.backend:
record, logs and metrics; outputs on `runs download`). The mirror's own state is `remote.json` in the sweep's folder
here, so `runs list|show|wait` catch up (catch_up) after the laptop was away, and `runs cancel SWEEP` stops the
driver there (cancel), which cancels its runs as Ctrl-C does a local sweep's.
"""
from __future__ import annotations

import base64
import dataclasses
import fcntl
import json
import os
import posixpath
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from mltrain.backends.remote import shipping, ssh
from mltrain.backends.remote.backend import CANCEL_WAIT_S, FOLLOW_S, PART, RemoteBackend
from mltrain.backends.remote.ssh import RemoteError
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError, RunCanceled, RunFailed
from mltrain.jobspec.records import RunDoc, SweepRef, World
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, NOT_STARTED, TERMINAL
from mltrain.runs.record import RunRecord

MIRROR = "remote.json"
#: The sweep folder's files mirrored at each look, their paths made this machine's
MIRRORED = ("sweep.json", "summary.json", MIRROR, "cluster_driver.log", ".remote.lock")


@dataclasses.dataclass
class Mirror:
    """A multirun whose driver runs on a cluster, as this machine knows it (`remote.json` in its sweep folder)."""

    login: str
    python: str
    folder: str                   # the driver's folder there: its request, driver.log, runs.txt
    outcome_there: str            # the driver's outcome, once it has ended
    sweep_here: str
    sweep_there: str
    runs_here: str
    runs_there: str
    pairs: List[List[str]]        # [here, there]: the paths of one side in the other's
    log_offset: int = 0
    runs: List[str] = dataclasses.field(default_factory=list)  # its runs' folders there, as mirrored
    #: the cluster's mltrain (its interpreter, its folder): a member is canceled by `mltrain runs cancel` there, not
    #: by signaling its driver, which is the whole sweep's
    cancel_with: List[str] = dataclasses.field(default_factory=list)
    outcome: Optional[Dict[str, Any]] = None
    ended: bool = False           # the outcome came back and every run it made was seen ended
    gone_looks: int = 0           # looks in a row that found the driver gone without its end written
    project_there: str = ""       # the project's copy there: where the driver runs from
    again: List[str] = dataclasses.field(default_factory=list)  # runs a resumed driver may run again
    seen_ended: List[str] = dataclasses.field(default_factory=list)  # runs seen ended: not read again

    @property
    def name(self) -> str:
        return Path(self.sweep_here).name

    def save(self) -> None:
        atomic_write(Path(self.sweep_here) / MIRROR, json.dumps(dataclasses.asdict(self), indent=2))

    @classmethod
    def load(cls, sweep_here: Path) -> Mirror:
        return cls(**json.loads((sweep_here / MIRROR).read_text(encoding="utf-8")))


def start(cluster: shipping.Cluster, project: shipping.Entries, project_there: str, request: Path, folder: str,
          outcome: str, sweep_here: Path, sweep_there: str, runs: Tuple[str, str], pairs: List[Tuple[str, str]]
          ) -> Mirror:
    """The project and the request sent (by content), the driver started there from the project's copy, and the
    mirror written here. `request`: the request's file here, `folder` the driver's folder there, `outcome` where the
    driver writes its outcome there, `runs`: the runs' folders (here, there)."""
    shipping.send(cluster, project, posixpath.relpath(project_there, cluster.home))
    shipping.send(cluster, {posixpath.basename(request.name): request}, posixpath.relpath(folder, cluster.home),
                  ("multirun", cluster.venv_python, cluster.mltrain_dir, project_there, "-m", "mltrain.cli.multirun",
                   posixpath.join(folder, request.name)))
    # only once its driver runs there: a mirror here always names a sweep that exists
    sweep_here.mkdir(parents=True, exist_ok=True)
    mirror = Mirror(cluster.login, cluster.python, folder, outcome, str(sweep_here), sweep_there, runs[0], runs[1],
                    [[a, b] for a, b in pairs], cancel_with=[cluster.venv_python, cluster.mltrain_dir],
                    project_there=project_there)
    mirror.save()
    return mirror


# ---------------------------------------------------------------------- following
def follow(mirror: Mirror, detach: bool = False) -> None:
    """Relay the driver's log and mirror its runs until its outcome comes back. Ctrl-C stops following, not the
    sweep; SIGTERM (a Python API driver's cancel) stops the driver there, which cancels its runs."""
    stopping, interrupted = threading.Event(), threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        # Ctrl-C stops the following even where this process was started with SIGINT ignored (a background job, a
        # test runner's worker): the engine installs its own handlers the same way (mltrain.launch.orchestrate)
        # a flag, not KeyboardInterrupt: Ctrl-C never lands inside a look's write of remote.json (stop 72's CI)
        signal.signal(signal.SIGINT, lambda *_: interrupted.set())
    lost, stopped = False, False
    log = Path(mirror.sweep_here) / "cluster_driver.log"
    shown = log.stat().st_size if log.exists() else 0  # what an earlier command following it showed already
    try:
        while True:
            if interrupted.is_set():
                raise KeyboardInterrupt
            if stopping.is_set() and not stopped:
                stop(mirror)
                stopped = True
            try:
                look(mirror)
                shown = _relay(mirror, log, shown)
                if lost:
                    print(f"connected to {mirror.login} again", flush=True)
                lost = False
            except RemoteError as exc:
                if not lost:
                    print(f"{exc}; the sweep goes on there, looking again", flush=True)
                lost = True
            if mirror.ended:
                break
            if detach and mirror.runs:
                print(f"detached: {mirror.name} runs on {mirror.login}; follow it with `mltrain runs list`, cancel it "
                      f"with `mltrain runs cancel {mirror.name}`", flush=True)
                return
            interrupted.wait(FOLLOW_S)
    except KeyboardInterrupt:
        stopped_following = MltrainError(f"stopped following {mirror.name}; it goes on on {mirror.login}: "
                                         f"`mltrain runs cancel {mirror.name}` cancels it")
        stopped_following.exit_code = 130
        raise stopped_following from None
    _raise_outcome(mirror)


def _relay(mirror: Mirror, log: Path, shown: int) -> int:
    """What the driver's log gained since `shown`, printed with this machine's paths (as the runs' records are
    mirrored), whichever look brought it here (this command's or a `runs list` beside it)."""
    if not log.exists():
        return shown
    with open(log, "rb") as f:
        f.seek(shown)
        chunk = f.read()
    if chunk:
        text = shipping.remapped(chunk.decode("utf-8", "replace"), [(b, a) for a, b in mirror.pairs], as_json=False)
        sys.stdout.write(text)
        sys.stdout.flush()
    return shown + len(chunk)


def _raise_outcome(mirror: Mirror) -> None:
    outcome = mirror.outcome or {}
    status, error = outcome.get("status"), outcome.get("error")
    if status == "Completed":
        return
    if outcome.get("refused"):  # refused there before any run was made: nothing of it is left here either
        if not mirror.runs:
            shutil.rmtree(mirror.sweep_here, ignore_errors=True)
        raise MltrainError(str(error))
    failure: MltrainError = RunCanceled(str(error)) if status == "Canceled" else RunFailed(str(error))
    if outcome.get("exit_code"):
        failure.exit_code = int(outcome["exit_code"])
    raise failure


def look(mirror: Mirror) -> None:
    """One look at the driver there: its log (into cluster_driver.log here), its outcome, its new runs mirrored here, and a look
    at each run not ended yet. One look at a time per sweep (the command following it and a `runs list` beside it),
    each starting from what the last one left in remote.json."""
    with open(Path(mirror.sweep_here) / ".remote.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            mirror.__dict__.update(Mirror.load(Path(mirror.sweep_here)).__dict__)
            _look(mirror)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _look(mirror: Mirror) -> None:
    if mirror.ended:
        return
    back = [(b, a) for a, b in mirror.pairs]
    answer = shipping.parse(ssh.far_side(mirror.login, mirror.python, "follow", mirror.folder, mirror.sweep_there,
                                         mirror.outcome_there, stdin=json.dumps({"log": mirror.log_offset}).encode(),
                                         timeout=60))
    chunk = base64.b64decode(answer.get("log") or "")
    if chunk:
        mirror.log_offset += len(chunk)
        with open(Path(mirror.sweep_here) / "cluster_driver.log", "ab") as f:
            f.write(chunk)
    for name in ("sweep", "summary"):  # MIRRORED
        if answer.get(name) is not None:
            text = shipping.remapped(json.dumps(answer[name], indent=2), back)
            atomic_write(Path(mirror.sweep_here) / f"{name}.json", text)
    backend = RemoteBackend()
    for there in answer.get("runs") or []:
        if there not in mirror.runs:
            _mirrored(mirror, there)
            mirror.runs.append(there)
    # the driver's end: its outcome, or its exit status (a resume writes no outcome); a driver gone without either
    # (killed, its node rebooted) is taken as ended only when a later look still finds nothing
    mirror.gone_looks = 0 if answer.get("alive") else mirror.gone_looks + 1
    done = answer.get("outcome") is not None or answer.get("exit") is not None or mirror.gone_looks > 2
    looked: List[Tuple[str, RunRecord]] = []
    for there in mirror.runs:
        if there in mirror.seen_ended and there not in mirror.again:  # no read of its record at each look
            continue
        looked.append((there, RunRecord.load(Path(_here(mirror, there)))))
    # one ssh call for the runs still going, one for those a resumed driver may run again (looked at until it ends)
    backend.refresh([r for there, r in looked if there not in mirror.again and r.status not in TERMINAL])
    backend.refresh([r for there, r in looked if there in mirror.again], even_ended=True)
    open_runs = 0
    for there, record in looked:
        if record.status in TERMINAL:
            if there not in mirror.seen_ended:
                mirror.seen_ended.append(there)
        else:
            open_runs += 1
    if done:
        mirror.outcome = answer.get("outcome") or _exit_outcome(mirror, answer.get("exit"))
        mirror.ended = open_runs == 0
        mirror.again = []  # this look read them after the driver's end: as it left them
        if mirror.ended:
            _bring_sweep_folder(mirror)
    mirror.save()


def _exit_outcome(mirror: Mirror, code: Optional[int]) -> Dict[str, Any]:
    log = Path(mirror.sweep_here) / "cluster_driver.log"
    if code is None:
        return {"status": FAILED, "exit_code": 1, "error": f"the sweep's driver on {mirror.login} ended without an "
                                                             f"outcome (killed?); its log: {log}"}
    status = COMPLETED if code == 0 else CANCELED if code == 130 else FAILED
    return {"status": status, "exit_code": code, "error": None if code == 0 else f"its driver on {mirror.login} "
                                                                                  f"exited with {code}; its log: {log}"}


def _bring_sweep_folder(mirror: Mirror) -> None:
    """The rest of the sweep's folder there, once it has ended (its chart, Optuna's journal): what `runs best` and a
    resume read. sweep.json and summary.json are mirrored already, with this machine's paths."""
    import tarfile  # startup

    with tempfile.TemporaryFile() as out:
        ssh.far_side(mirror.login, mirror.python, "pack", mirror.sweep_there, ".", timeout=600, stdout=out)
        out.seek(0)
        with tarfile.open(fileobj=out, mode="r|") as tar:
            for member in tar:
                name = posixpath.normpath(member.name)
                if member.isfile() and "/" not in name and name not in MIRRORED and not name.startswith("."):
                    tar.extract(member, mirror.sweep_here, filter="data")


def _here(mirror: Mirror, there: str) -> str:
    if there.startswith(mirror.runs_there + "/"):
        return os.path.join(mirror.runs_here, posixpath.relpath(there, mirror.runs_there))
    return os.path.join(mirror.runs_here, posixpath.basename(there))


def _mirrored(mirror: Mirror, there: str) -> None:
    """A run the driver made there, mirrored here as a remote run: the next look fills in its record."""
    here = _here(mirror, there)
    Path(here).mkdir(parents=True, exist_ok=True)
    pairs = [[here, there]] + mirror.pairs
    part = {"login": mirror.login, "python": mirror.python, "run_dir": there, "offsets": {},
            "pairs": [[b, a] for a, b in pairs], "cancel_with": mirror.cancel_with}
    now = time.time()
    RunRecord(here, RunDoc(id=Path(here).name, experiment="mltrain", status=NOT_STARTED, created=now,
                           phases={NOT_STARTED: now}, backend=PART, compute="slurm", distribution="", world=World(1, 1, 1),
                           command=[], cwd="", sweep=SweepRef(mirror.sweep_here), backend_parts={PART: part})).save()


# ---------------------------------------------------------------------- the run commands' view
def mirrors(runs_root: Path) -> List[Path]:
    """The sweep folders under `runs_root` whose drivers run on a cluster and have not been seen ending."""
    found = []
    for path in sorted((runs_root / "_sweeps").glob(f"*/{MIRROR}")):
        try:
            if not json.loads(path.read_text(encoding="utf-8")).get("ended"):
                found.append(path.parent)
        except (OSError, ValueError):
            continue
    return found


def catch_up(runs_root: Path) -> None:
    """One look at each multirun there that has not ended (its new runs mirrored here); an unreachable cluster
    leaves it as last seen."""
    for folder in mirrors(runs_root):
        try:
            look(Mirror.load(folder))
        except (RemoteError, OSError, ValueError):
            continue


def stop(mirror: Mirror) -> None:
    """The driver there asked to stop: it cancels its members or steps and ends Canceled."""
    try:
        ssh.far_side(mirror.login, mirror.python, "stop", mirror.folder, timeout=60)
    except RemoteError as exc:
        raise MltrainError(f"cannot reach {mirror.login} to cancel {mirror.name}: {exc}") from None


def cancel(sweep_here: Path) -> str:
    """`mltrain runs cancel SWEEP` of a multirun whose driver runs there: the driver asked to stop, then followed
    until it has canceled its runs; what it ended as."""
    mirror = Mirror.load(sweep_here)
    if mirror.ended:
        return f"had ended {(mirror.outcome or {}).get('status')}"
    stop(mirror)
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline and not mirror.ended:
        try:
            look(mirror)
        except RemoteError:
            pass
        time.sleep(FOLLOW_S)
    return str((mirror.outcome or {}).get("status")) if mirror.ended else \
        f"asked to stop; not ended within {CANCEL_WAIT_S:.0f}s (see `mltrain runs list`)"


def resume(sweep_here: Path, detach: bool) -> None:
    """`mltrain runs resume SWEEP` of a sweep or pipeline whose driver ran there: `mltrain runs resume` there, its
    driver again, detached; its runs run again are looked at anew here; followed as at its submit."""
    mirror = Mirror.load(sweep_here)
    if not mirror.ended:
        look(mirror)
    if not mirror.ended:
        raise MltrainError(f"{mirror.name} still runs on {mirror.login}: only a sweep that has ended can be resumed "
                           f"(`mltrain runs cancel {mirror.name}` stops it)")
    venv, site = mirror.cancel_with
    pipeline = next((there for there in mirror.runs
                     if RunRecord.load(Path(_here(mirror, there))).doc.pipeline is not None), None)
    if pipeline is None and not (sweep_here / "sweep.json").is_file():
        raise MltrainError(f"{mirror.name} is a sweep over values: resume its members one by one "
                           f"(`mltrain runs resume RUN`), as a sweep run here")
    what = posixpath.basename(pipeline) if pipeline else mirror.sweep_there
    try:
        ssh.far_side(mirror.login, mirror.python, "multirun", mirror.folder, venv, site, mirror.project_there,
                     "-m", "mltrain", "runs", "--root", mirror.runs_there, "resume", what, timeout=120)
    except RemoteError as exc:
        raise MltrainError(f"resuming {mirror.name} on {mirror.login} failed: {exc}") from None
    # the runs it may run again: looked at, ended or not, until the resumed driver ends
    mirror.again = [there for there in mirror.runs
                    if RunRecord.load(Path(_here(mirror, there))).status in (FAILED, CANCELED)]
    mirror.seen_ended = [there for there in mirror.seen_ended if there not in mirror.again]
    mirror.ended, mirror.outcome, mirror.gone_looks = False, None, 0
    mirror.save()
    print(f"resumed on {mirror.login}: {mirror.name}'s driver runs there again; `mltrain runs cancel {mirror.name}` "
          f"cancels it", flush=True)
    follow(mirror, detach)


def mirror_holding(runs_root: Path, run_dir: Path) -> Optional[Path]:
    """The sweep folder here of the multirun whose driver made the run mirrored in `run_dir`, or None."""
    for path in (runs_root / "_sweeps").glob(f"*/{MIRROR}"):
        try:
            mirror = Mirror.load(path.parent)
        except (OSError, ValueError, TypeError):
            continue
        if any(Path(_here(mirror, there)) == run_dir for there in mirror.runs):
            return path.parent
    return None
