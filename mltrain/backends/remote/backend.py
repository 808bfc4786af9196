"""A Slurm cluster reached over ssh: a Slurm compute with a `login` (issue 65), as Azure ML submits from a laptop to
its compute.

The run is frozen and made here as for any compute (its record, snapshot, config). Then it goes over
(mltrain.backends.remote.shipping): mltrain at this version, the run's folder with its paths made the cluster's,
and the run's driver is started there, detached: mltrain's own Slurm backend runs it on the cluster, as it would
from the login node, and the run goes on when this machine sleeps, loses the connection or is Ctrl-C'd.

What comes back is the run's record and its logs and metrics as they are written (`look`), into the run's folder
here: so `runs list|show|logs|status|wait` and the UI read it as any run's, each look catching up from where the
last one stopped. Outputs and checkpoints stay on the cluster until asked for (`fetch`: `runs download`).
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import posixpath
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from mltrain.backends.base import Plan
from mltrain.backends.remote import shipping, ssh
from mltrain.backends.remote.ssh import RemoteError
from mltrain.backends.slurm.backend import SlurmBackend
from mltrain.base.atomic import atomic_write
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.records import RunDoc
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import CANCELED, FAILED, TERMINAL
from mltrain.runs.console import Console
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

PART = "remote"
#: The remote files kept here under another name: this machine's own driver writes logs/driver.log.
LOCAL_NAMES = {"logs/driver.log": "logs/cluster_driver.log"}
#: Seconds between two looks while a command follows its run: often while it starts (a detached submit returns
#: once Slurm has the job), then every FOLLOW_S.
FOLLOW_S = 0.5
FIRST_LOOKS_S = (0.05, 0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.3, 0.3)
#: How long a cancel waits for the cluster to say the run ended.
CANCEL_WAIT_S = 60.0
#: What of the run's folder here does not go over: its MLflow store names this machine's paths.
NOT_SENT = ("mlflow.db", "run.json", "job.json", ".run.json.reserve", "logs")


class RemoteBackend(SlurmBackend):
    """mltrain's Slurm backend, run on the cluster behind `compute.login`."""

    name = "remote"
    wait_poll_s = 1.0
    holds_dependencies = False  # a pipeline's steps are each submitted by its driver here (for now)

    def __init__(self) -> None:
        super().__init__()
        self._clusters: Dict[Tuple[str, str], shipping.Cluster] = {}
        self._lock = threading.Lock()

    def _cluster(self, compute: SlurmComputeConf) -> shipping.Cluster:
        """The cluster, probed once per command (a refusal is one line), with mltrain ready there."""
        key = (str(compute.login), str(compute.python))
        with self._lock:
            if key not in self._clusters:
                self._clusters[key] = shipping.ready(shipping.connect(*key))
            return self._clusters[key]

    def preflight(self, jobs: Sequence[FrozenJob] = ()) -> None:
        for job in jobs[:1]:  # a sweep's members share their compute
            self._cluster(compute_as(job.compute, SlurmComputeConf))

    def plan(self, job: FrozenJob, share: int = 1) -> Plan:
        plan = super().plan(job, share)
        compute = compute_as(job.compute, SlurmComputeConf)
        plan.notes.insert(0, f"sent over ssh to {compute.login} (mltrain, the run's folder, content-addressed); its "
                             f"driver runs there and submits the Slurm job below with the cluster's paths")
        return plan

    def validate(self, job: FrozenJob) -> None:
        """The submission's parameters, as submitit checks them; the partition is the cluster's to check."""
        from mltrain.backends.slurm import pack_driver  # startup
        from mltrain.backends.slurm.submission import executor_parameters, make_executor  # startup

        pack_driver.check(job)
        make_executor(executor_parameters(job), Path(job.run_dir) / "submitit",
                      compute_as(job.compute, SlurmComputeConf).max_requeues, offline=True)

    # ------------------------------------------------------------------ submission
    def launch(self, plans: List[Plan], records: List[RunRecord], consoles: List[Console],
               cancel: threading.Event) -> List[str]:
        return [self._launch_one(plan.job, record, console, cancel)
                for plan, record, console in zip(plans, records, consoles)]

    def _launch_one(self, job: FrozenJob, record: RunRecord, console: Console, cancel: threading.Event) -> str:
        compute = compute_as(job.compute, SlurmComputeConf)
        if record.doc.attempts and (record.doc.backend_parts.get(PART) or {}).get("run_dir"):
            return self._resume_there(record, console, cancel, job.detach)
        try:
            cluster = self._cluster(compute)
            there = posixpath.join(cluster.home, "runs", job.run_id)
            pairs = self._pairs(job.run_dir, there, cluster)
            record.reload()
            record.doc.backend_parts = {PART: {"login": cluster.login, "python": cluster.python, "run_dir": there,
                                               "offsets": {}, "pairs": [[b, a] for a, b in pairs]}}
            record.save()
            if record.cancel_requested():  # asked while it was being sent: it never starts there
                finish(record, CANCELED, error=record.cancel_requested(), console=console)
                return CANCELED
            self._send_run(cluster, job, record, there, pairs, start=(cluster.venv_python, cluster.mltrain_dir))
        except RemoteError as exc:
            finish(record, FAILED, error=f"submission to {compute.login} failed: {exc}", console=console)
            return FAILED
        console.status(f"sent to {cluster.login}: run {job.run_id} runs there in {there}")
        return self._follow(record, console, cancel, job.detach)

    def _resume_there(self, record: RunRecord, console: Console, cancel: threading.Event, detach: bool) -> str:
        """`runs resume RUN` of a run sent earlier: the cluster's mltrain resumes its record there (its checkpoint,
        its folder), and this machine follows it as before, its logs caught up from where the last look stopped."""
        part = record.doc.backend_parts[PART]
        try:
            if part.get("cancel_with"):  # a run its sweep's driver made there: that driver's mltrain
                venv, site = (str(p) for p in part["cancel_with"])
            else:  # a run sent by itself: mltrain at this version, as its first driver ran with
                cluster = shipping.ready(shipping.connect(part["login"], part["python"]))
                venv, site = cluster.venv_python, cluster.mltrain_dir
            ssh.far_side(part["login"], part["python"], "resume", part["run_dir"], venv, site, timeout=120)
        except RemoteError as exc:
            finish(record, FAILED, error=f"resuming run {record.id} on {part['login']} failed: {exc}", console=console)
            return FAILED
        console.status(f"resumed on {part['login']}: run {record.id} runs there again in {part['run_dir']}")
        return self._follow(record, console, cancel, detach)

    @staticmethod
    def _pairs(here: str, there: str, cluster: shipping.Cluster) -> List[Tuple[str, str]]:
        """This machine's paths in a frozen job and the cluster's for them."""
        site = str(shipping.PACKAGE.parent)
        # the other runs it names (a pipeline's step reads its parents' outputs) are the cluster's runs too
        pairs = [(here, there), (os.path.dirname(here), posixpath.dirname(there)),
                 (sys.executable, cluster.venv_python), (site, cluster.mltrain_dir),
                 (os.path.dirname(sys.executable), posixpath.dirname(cluster.venv_python))]
        # a path may be frozen in either form where a folder is a symbolic link (a venv linked into a project)
        return pairs + [(os.path.realpath(a), b) for a, b in pairs[1:] if os.path.realpath(a) != a]

    def _send_run(self, cluster: shipping.Cluster, job: FrozenJob, record: RunRecord, there: str,
                  pairs: List[Tuple[str, str]], start: Tuple[str, ...]) -> None:
        data = _reused_resolved(job.to_json(), os.path.dirname(job.run_dir))
        data["backend"], data["detach"] = "slurm", False  # the driver there follows it to its end
        data["compute"] = {**data["compute"], "login": None}
        env = data.setdefault("env", {})
        if "PATH" in env:
            env["PATH"] = f"{posixpath.dirname(cluster.venv_python)}:{cluster.path}"
        # the ranks' interpreter there has no mltrain of its own: the one sent goes on their path, last
        env["PYTHONPATH"] = ":".join(p for p in (env.get("PYTHONPATH"), "@MLTRAIN@") if p)
        doc = record.doc.to_json()
        doc.update(backend="slurm", driver_pid=None, host=None)
        doc.pop(PART, None)
        with tempfile.TemporaryDirectory(prefix="mltrain-remote-") as tmp:
            made: Dict[str, Path] = {}
            for name, value in (("job.json", data), ("run.json", doc)):
                made[name] = Path(tmp) / name
                text = shipping.remapped(json.dumps(value, indent=2), pairs)
                made[name].write_text(text.replace("@MLTRAIN@", cluster.mltrain_dir), encoding="utf-8")
            entries: shipping.Entries = dict(made)
            for child in sorted(record.dir.iterdir()):
                if child.name in NOT_SENT:
                    continue
                if child.is_dir() and not child.is_symlink():
                    entries.update(shipping.folder_entries(child, child.name))
                    entries.setdefault(f"{child.name}/", {"dir": "1"})
                elif child.is_file():
                    entries[child.name] = child
            for name in ("outputs", "logs", "checkpoints", "ranks"):
                entries.setdefault(f"{name}/", {"dir": "1"})
            shipping.send(cluster, entries, posixpath.relpath(there, cluster.home), start)

    # ------------------------------------------------------------------ following
    def _follow(self, record: RunRecord, console: Console, cancel: threading.Event, detach: bool) -> str:
        login = record.doc.backend_parts[PART]["login"]
        relay = record.dir / LOCAL_NAMES["logs/driver.log"]
        # what an earlier command following it has shown already (a resumed run's first attempt) is not shown again
        shown, said, lost, looks = relay.stat().st_size if relay.exists() else 0, "", False, 0
        while True:
            try:
                self._look(record)
                if lost:
                    console.status(f"connected to {login} again")
                lost = False
            except RemoteError as exc:
                if not lost:
                    console.status(f"{exc}; the run goes on there, looking again")
                lost = True
            if relay.exists():  # what the driver there prints: statuses, rank 0's output
                with open(relay, "rb") as f:
                    f.seek(shown)
                    chunk = f.read()
                shown += len(chunk)
                if chunk:
                    console.raw(chunk)
            status = record.status
            if status in TERMINAL:
                return status
            if detach and status != said and status not in ("NotStarted", "Preparing"):
                console.status(f"detached: run {record.id} runs on {login}; follow it with "
                               f"`mltrain runs status|logs|cancel {record.id}`")
                return status
            if cancel.is_set():
                asked = record.cancel_requested()
                if asked is None:  # Ctrl-C while following: the command stops, the run does not
                    console.status(f"stopped following run {record.id}; it goes on on {login}: "
                                   f"`mltrain runs cancel {record.id}` cancels it")
                    return status
                self.cancel(record)
                return record.status
            said = status
            cancel.wait(FIRST_LOOKS_S[looks] if looks < len(FIRST_LOOKS_S) else FOLLOW_S)
            looks += 1

    @contextlib.contextmanager
    def _held(self, records: List[RunRecord]) -> Iterator[None]:
        """One look at a time per run (the command following it and a `runs show` beside it); several runs' locks
        are taken in one order, so two looks at overlapping runs never wait on each other."""
        with contextlib.ExitStack() as stack:
            for record in sorted(records, key=lambda r: str(r.dir)):
                f = stack.enter_context(open(record.dir / ".remote.lock", "a"))
                fcntl.flock(f, fcntl.LOCK_EX)
            yield

    def _look(self, record: RunRecord, even_ended: bool = False) -> None:
        self._look_at([record], even_ended)

    def _look_at(self, records: List[RunRecord], even_ended: bool = False) -> None:
        """One look at runs on one cluster, one ssh call for them all (a sweep's members): each one's record and
        what its logs and metrics have gained since. `even_ended`: a run seen ended is looked at too (its sweep's
        driver there may be running it again)."""
        with self._held(records):
            asked: Dict[str, Tuple[RunRecord, Dict[str, Any]]] = {}
            for record in records:
                record.reload()
                part: Dict[str, Any] = dict(record.doc.backend_parts.get(PART) or {})
                if part and (record.status not in TERMINAL or even_ended):
                    asked[part["run_dir"]] = (record, part)
            if not asked:
                return
            first = next(iter(asked.values()))[1]
            # a run its sweep's driver made there (mltrain.backends.remote.multirun) has no frozen job here yet
            request = {there: {**(part.get("offsets") or {}),
                               "_whole": [] if (record.dir / "job.json").exists() else ["job.json"]}
                       for there, (record, part) in asked.items()}
            answers = shipping.parse(ssh.far_side(first["login"], first["python"], "looks",
                                                  stdin=json.dumps(request).encode(), timeout=60))
            for there, (record, part) in asked.items():
                self._take(record, part, answers.get(there) or {})

    def _take(self, record: RunRecord, part: Dict[str, Any], answer: Dict[str, Any]) -> None:
        """What one look brought of one run, into its folder and record here."""
        offsets: Dict[str, int] = dict(part.get("offsets") or {})
        back = [(str(a), str(b)) for a, b in part.get("pairs") or []]
        if answer.get("whole", {}).get("job.json"):  # resumed from here as any remote run: its backend is this one
            job = json.loads(shipping.remapped(answer["whole"]["job.json"], back))
            atomic_write(record.dir / "job.json", json.dumps({**job, "backend": PART}, indent=2))
        for rel, (offset, text) in sorted(answer.get("files", {}).items()):
            if int(offset) != offsets.get(rel, 0):
                continue
            data = base64.b64decode(text)
            local = record.dir / LOCAL_NAMES.get(rel, rel)
            local.parent.mkdir(parents=True, exist_ok=True)
            with open(local, "ab") as f:
                f.write(data)
            offsets[rel] = int(offset) + len(data)
        part["offsets"] = offsets
        there = answer.get("run")
        if there is None:
            record.doc.backend_parts[PART] = part
            record.save()
            return
        doc = json.loads(shipping.remapped(json.dumps(there), back))
        doc.update(backend=PART, driver_pid=record.doc.driver_pid, host=record.doc.host)
        doc[PART] = part
        record.doc = RunDoc.from_json(doc)
        record.save()

    # ------------------------------------------------------------------ the run handle's view
    def refresh(self, records: List[RunRecord], even_ended: bool = False) -> None:
        clusters: Dict[Tuple[str, str], List[RunRecord]] = {}
        for record in records:
            part = record.doc.backend_parts.get(PART)
            if (even_ended or record.status not in TERMINAL) and part:
                clusters.setdefault((part["login"], part["python"]), []).append(record)
        for group in clusters.values():
            try:
                self._look_at(group, even_ended)
            except RemoteError:
                pass  # unreachable now: the records stand as last seen; the next look catches up

    def cancel(self, record: RunRecord) -> None:
        part = record.doc.backend_parts.get(PART)
        if not part:  # not sent yet: its driver here sees the request before it starts it there
            record.request_cancel("canceled by the user")
            return
        record.request_cancel("canceled by the user")
        if part.get("cancel_with"):  # a member of a sweep whose driver runs there: the cluster's mltrain cancels it
            venv, site = part["cancel_with"]
            there = part["run_dir"]
            ssh.run(part["login"], ["env", f"PYTHONPATH={site}", venv, "-m", "mltrain", "runs", "--root",
                                    posixpath.dirname(there), "cancel", posixpath.basename(there)], timeout=120)
        else:
            ssh.far_side(part["login"], part["python"], "cancel", part["run_dir"], timeout=60)
        deadline = time.monotonic() + CANCEL_WAIT_S
        while time.monotonic() < deadline:
            self._look(record)
            if record.status in TERMINAL:
                return
            time.sleep(FOLLOW_S)

    def locate(self, record: RunRecord) -> Optional[str]:
        part = record.doc.backend_parts.get(PART) or {}
        job = (record.doc.extra.get("slurm") or {}).get("job_id")
        where = f"{part.get('login')}:{part.get('run_dir')}"
        return f"Slurm job {job} on {where}" if job else (where if part else None)

    def take_back(self, record: RunRecord) -> bool:
        return False

    def fetch(self, record: RunRecord, path: str) -> List[str]:
        """`path` of the run's folder on the cluster (a file or a folder: `outputs`, `checkpoints/last.pt`) copied
        into the run's folder here; returns the files it brought."""
        import tarfile  # startup

        part = record.doc.backend_parts.get(PART)
        if not part:
            raise RemoteError(f"run {record.id} was never sent to its cluster: nothing to download")
        names = []
        # each file lands whole or not at all: extracted beside the run first, then renamed into place, so a
        # download cut by Ctrl-C or a lost connection never leaves a part of a file that a later look takes as whole
        with tempfile.TemporaryFile() as out, tempfile.TemporaryDirectory(dir=record.dir, prefix=".download-") as tmp:
            ssh.far_side(part["login"], part["python"], "pack", part["run_dir"], path, timeout=3600, stdout=out)
            out.seek(0)
            with tarfile.open(fileobj=out, mode="r|") as tar:
                for member in tar:
                    if not member.isfile() or member.name.startswith(("/", "..")):
                        continue
                    tar.extract(member, tmp, filter="data")
                    final = record.dir / member.name
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(os.path.join(tmp, member.name), final)
                    names.append(member.name)
        return names


def _reused_resolved(value: Any, runs: str) -> Any:
    """`value` with each path into another run's folder that is a link here (a pipeline step reused: its outputs
    link to the run that made them) made the path it links to, which is the run the cluster holds."""
    if isinstance(value, dict):
        return {k: _reused_resolved(v, runs) for k, v in value.items()}
    if isinstance(value, list):
        return [_reused_resolved(v, runs) for v in value]
    if isinstance(value, str) and value.startswith(runs + os.sep):
        real = os.path.realpath(value)
        if real != value and real.startswith(os.path.realpath(runs) + os.sep):
            return os.path.join(runs, os.path.relpath(real, os.path.realpath(runs)))
    return value
