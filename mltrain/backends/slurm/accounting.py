"""What Slurm's accounting says about jobs: `sacct` output read into states and times, and Slurm's
states mapped to run statuses. The parsing is pure, so it is tested on recorded sacct text."""
from __future__ import annotations

import dataclasses
import functools
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, QUEUED, RUNNING

# Slurm job state -> run status (sacct names; submitit reports them as they are).
STATES = {
    "PENDING": QUEUED, "REQUEUED": QUEUED, "REQUEUE_HOLD": QUEUED, "REQUEUE_FED": QUEUED, "SUSPENDED": QUEUED,
    "CONFIGURING": QUEUED, "RUNNING": RUNNING, "COMPLETING": RUNNING, "COMPLETED": COMPLETED,
    "CANCELLED": CANCELED, "FAILED": FAILED, "TIMEOUT": FAILED, "NODE_FAIL": FAILED, "OUT_OF_MEMORY": FAILED,
    "PREEMPTED": QUEUED, "BOOT_FAIL": FAILED, "DEADLINE": FAILED,
}
FIELDS = "JobID,State,Start,End,NodeList"
#: A sacct that has not answered by then is taken as no answer (asked again at the next poll).
QUERY_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class JobState:
    state: str  # sacct's word ('CANCELLED by 0' -> CANCELLED); UNKNOWN when sacct does not list it
    start: Optional[float] = None
    end: Optional[float] = None
    nodes: str = ""  # Slurm's node list of the job ('n[1-2]'), when accounting gave one
    #: The job's incarnations that ended NODE_FAIL, oldest first (sacct -D lists each requeue's incarnation apart):
    #: a loss Slurm repaired itself (requeued, and ran again on other nodes) before anyone looked is seen here.
    node_fails: Tuple[JobState, ...] = ()
    #: How many incarnations accounting listed; 0 when this is not accounting's word (the ranks' own reports).
    incarnations: int = 0

    @property
    def status(self) -> Optional[str]:
        return STATES.get(self.state)


def _when(text: str) -> Optional[float]:
    if not text or text in ("Unknown", "None"):
        return None
    try:
        return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def parse(text: str, job_ids: List[str]) -> Dict[str, JobState]:
    """`sacct -X -D -n -P -o JobID,State,Start,End,NodeList` output, for the given ids. Array members not
    started yet are listed together as '<id>_[0-2]' and reported PENDING. A requeued job has one line per
    incarnation (-D), oldest first: the last one is its state, except that a job waiting again after a
    NODE_FAIL (Slurm requeues a batch job whose node died) is reported NODE_FAIL: the node it needs may
    never come back, and a run waiting for it would wait for ever. Every NODE_FAIL incarnation is kept in
    node_fails, also once a later one runs: Slurm may requeue and start the job again between two looks."""
    lines: Dict[str, List[JobState]] = {}
    pending_arrays = set()
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 2:
            continue
        jid, state = parts[0], (parts[1].split() or ["UNKNOWN"])[0].upper()
        start = _when(parts[2]) if len(parts) > 2 else None
        end = _when(parts[3]) if len(parts) > 3 else None
        nodes = parts[4] if len(parts) > 4 and parts[4] != "None assigned" else ""
        lines.setdefault(jid, []).append(JobState(state, start, end, nodes))
        if "_[" in jid:
            pending_arrays.add(jid.split("_[")[0])
    states: Dict[str, JobState] = {}
    for jid, seen in lines.items():
        last = len(seen) - 1
        while last > 0 and seen[last].status == QUEUED:
            last -= 1
        current = seen[last] if seen[last].state == "NODE_FAIL" else seen[-1]
        fails = tuple(s for s in seen if s.state == "NODE_FAIL")
        states[jid] = dataclasses.replace(current, node_fails=fails, incarnations=len(seen))
    out = {}
    for jid in job_ids:
        if jid in states:
            out[jid] = states[jid]
        elif jid.split("_")[0] in pending_arrays:
            out[jid] = JobState("PENDING")
        else:
            out[jid] = JobState("UNKNOWN")
    return out


def query(job_ids: List[str]) -> Dict[str, JobState]:
    """One sacct call for every job; asked directly rather than through submitit's watcher, whose
    cache adds seconds to every change. No answer (slurmdbd down or restarting, sacct failing or
    hanging) gives no states at all, never UNKNOWN ones: callers keep what they knew and ask again,
    and slurmctld hands slurmdbd what it missed once it is back, so the answers catch up."""
    if not job_ids:
        return {}
    try:
        proc = subprocess.run(["sacct", "-j", ",".join(job_ids), "-X", "-D", "-n", "-P", "-o", FIELDS],
                              capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if proc.returncode != 0:
        return {}
    return parse(proc.stdout, job_ids)


#: How long a look back waits for accounting to list a requeued job's every incarnation: slurmctld hands them to
#: slurmdbd asynchronously, so sacct may lag the job by a moment; past this, what it lists is taken as it is.
LOOK_BACK_WAIT_S = 5.0


def look_back(job_id: str, incarnations: int) -> Optional[JobState]:
    """The job as accounting lists it once it lists at least `incarnations` of it (attempt N of a job is its
    N+1th), or after LOOK_BACK_WAIT_S whatever it lists then; None when it never answered."""
    deadline = time.monotonic() + LOOK_BACK_WAIT_S
    while True:
        found = query([job_id]).get(job_id)
        if found is not None and found.incarnations >= incarnations:
            return found
        if time.monotonic() >= deadline:
            return found
        time.sleep(0.5)


class SharedQuery:
    """One `sacct` per interval for every run this process follows. A HyperDrive sweep follows each member in
    a thread of its own (mltrain.backends.handover), and a resumed one each member it finds still on Slurm:
    asked separately, accounting would be asked once per member per interval (submitit #1759). Here, once
    any caller has asked within `fresh_s`, the others share that answer (a job it did not cover yet gets
    none: its follower asks again a poll later, as after any unanswered look); otherwise one call is made
    for every job a caller asked about within STALE_S. The calls are bounded by time, not by members."""

    STALE_S = 60.0
    SHARE_PART = 0.75

    def __init__(self, run: Optional[Callable[[List[str]], Dict[str, JobState]]] = None) -> None:
        self._run = run or (lambda ids: query(ids))  # looked up when asked: the module's query as it is then
        self._lock = threading.Lock()
        self._wanted: Dict[str, float] = {}   # job id -> when a caller last asked about it
        self._known: Dict[str, Tuple[float, JobState]] = {}  # job id -> (when answered, its state)
        self._asked = -1e18  # when accounting was last asked

    def __call__(self, job_ids: List[str], fresh_s: float) -> Dict[str, JobState]:
        if not job_ids:
            return {}
        with self._lock:  # a caller arriving while another asks waits for that answer, then shares it
            now = time.monotonic()
            for job_id in job_ids:
                self._wanted[job_id] = now
            # SHARE_PART: a lone follower asking every fresh_s never gets its own previous answer back
            if now - self._asked >= fresh_s * self.SHARE_PART:
                for job_id, when in list(self._wanted.items()):
                    if now - when > self.STALE_S:
                        del self._wanted[job_id]
                        self._known.pop(job_id, None)
                # asked, answered or not: a slurmdbd that does not answer is not asked by every follower in turn
                self._asked = now
                states = self._run(sorted(self._wanted))
                for job_id, state in states.items():
                    self._known[job_id] = (self._asked, state)
            # the last call's answers only: one that did not answer leaves nothing to share
            return {j: self._known[j][1] for j in job_ids if j in self._known and self._known[j][0] == self._asked}


#: The process's shared accounting (SharedQuery).
query_shared = SharedQuery()


def lost_nodes(nodes: str) -> List[str]:
    """Which of these nodes Slurm holds DOWN, DRAINED, FAILED or not responding, each with its reason
    ('n2 (Not responding)'); empty when Slurm cannot say."""
    if not nodes:
        return []
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-n", nodes, "-o", "%N|%T|%E"], capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        name, state, reason = (line.split("|") + ["", ""])[:3]
        if state.endswith("*") or state.rstrip("*~#$@^-+").startswith(("down", "drain", "fail")):
            said = f"{name} ({reason})" if reason and reason != "none" else name
            if said not in found:
                found.append(said)
    return found


def queue_state(job_id: str) -> Optional[str]:
    """What slurmctld says of the job now (squeue: PENDING, RUNNING, ...); None when it does not answer or no
    longer holds the job."""
    try:
        proc = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    state = proc.stdout.strip().upper() if proc.returncode == 0 else ""
    return state or None


def scancel(job_ids: List[str]) -> None:
    if job_ids:
        subprocess.run(["scancel", *job_ids], check=False, timeout=30, capture_output=True)


@dataclass(frozen=True)
class Partition:
    name: str
    total_nodes: int
    max_nodes: Optional[int]  # per job (MaxNodes); None when UNLIMITED
    default: bool


def parse_partitions(text: str) -> Dict[str, Partition]:
    """`scontrol show partition -o` output (one partition a line of KEY=VALUE words), by name."""
    out: Dict[str, Partition] = {}
    for line in text.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        name, total = fields.get("PartitionName"), fields.get("TotalNodes", "")
        if not name or not total.isdigit():
            continue
        most = fields.get("MaxNodes", "")
        out[name] = Partition(name, int(total), int(most) if most.isdigit() else None, fields.get("Default") == "YES")
    return out


def partition(name: Optional[str]) -> Optional[Partition]:
    """The named partition, or the cluster's default one; None when Slurm cannot say (no scontrol here,
    the controller not answering): the submission itself will tell then."""
    try:
        proc = subprocess.run(["scontrol", "show", "partition", "-o"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = parse_partitions(proc.stdout) if proc.returncode == 0 else {}
    if name is not None:
        return found.get(name)
    return next((p for p in found.values() if p.default), None)


#: Slurm's own default MaxArraySize (array indices 0 to 1000).
DEFAULT_MAX_ARRAY_SIZE = 1001
#: Slurm's own default MaxJobCount: job records the controller holds at once (a queued array counts as many
#: as it has tasks when it is submitted: slurmctld refuses it with EAGAIN past the limit).
DEFAULT_MAX_JOB_COUNT = 10000


def parse_config_value(text: str, name: str) -> Optional[int]:
    """A positive number from `scontrol show config` output (`MaxArraySize            = 1001`); None when absent."""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name and value.strip().isdigit() and int(value.strip()) > 0:
            return int(value.strip())
    return None


def parse_max_array_size(text: str) -> Optional[int]:
    return parse_config_value(text, "MaxArraySize")


@dataclass(frozen=True)
class ClusterLimits:
    """What the controller allows one submission: tasks per array, job records in all."""
    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_job_count: int = DEFAULT_MAX_JOB_COUNT


def parse_limits(text: str) -> ClusterLimits:
    return ClusterLimits(parse_config_value(text, "MaxArraySize") or DEFAULT_MAX_ARRAY_SIZE,
                         parse_config_value(text, "MaxJobCount") or DEFAULT_MAX_JOB_COUNT)


@functools.lru_cache(maxsize=1)
def limits() -> ClusterLimits:
    """The cluster's limits, from one `scontrol show config` per command (the preflight and the submission
    both ask); Slurm's defaults when the controller cannot say (the submission would then tell)."""
    try:
        proc = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=QUERY_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ClusterLimits()
    return parse_limits(proc.stdout) if proc.returncode == 0 else ClusterLimits()

