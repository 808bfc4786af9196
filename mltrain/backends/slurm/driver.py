"""The driver side of a Slurm run: submit every member (one job array for a sweep) and follow them.

While it waits, the driver maps Slurm's states to run statuses and streams what each member shows.
Its output keeps the order a reader expects: a member's `Running` comes before its first output
line (the first output is proof it runs, even when accounting lags), and its `Finalizing` and final
line come after its last one. A sweep's members are prefixed `[#N]`, whole line by whole line.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from mltrain.backends.base import Plan
from mltrain.backends.handover import cancel_reason
from mltrain.backends.slurm import accounting, node_loss
from mltrain.backends.slurm.rank import SlurmRank
from mltrain.backends.slurm.run_part import SlurmJob, slurm_job
from mltrain.backends.slurm.submission import make_executor
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, PREPARING, QUEUED, RUNNING, TERMINAL
from mltrain.ranks import reports
from mltrain.ranks.process import follow
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: How often the driver looks at the ranks' reports and logs (cheap: a few small files).
TICK_S = 0.1
#: Accounting is asked this many poll_s apart while the ranks' reports tell how the runs are doing...
SAFETY_POLLS = 5
#: ...and twice as far apart after each answer that told nothing the reports had not, up to this many
#: times that: a 1,000-member sweep asked sacct 97 times in 558 s, where hydra-submitit-launcher asked
#: 9 times (benchmarks/bench_slurm_scale.py); what only accounting can tell (a job cancelled from
#: outside, a lost node) is then seen within 6 x SAFETY_POLLS x poll_s (30 s with poll_s 1).
SAFETY_BACKOFF = 6


def submit(plans: List[Plan], records: List[RunRecord], consoles: List[Console]) -> List[str]:
    """Prepare and submit every run; returns their Slurm job ids in the same order.

    A sweep is one job array, or several where it has more members than the cluster's MaxArraySize
    (`scontrol show config`): each array then holds at most that many, members keep their order and their
    sweep indices, and compute.array_parallelism stays one limit across them (each array waits, with
    `afterany`, for the one before it, which runs at most that many tasks at once)."""

    jobs = [p.job for p in plans]
    compute = compute_as(jobs[0].compute, SlurmComputeConf)
    sweep_dir = jobs[0].sweep_dir if len(jobs) > 1 else None
    # A lone run's submitit files go in its own directory (as its dry run showed); an array's beside the sweep.
    folder = Path(sweep_dir) / "submitit" if sweep_dir else Path(plans[0].details["folder"])
    listings = prepare(jobs, records, consoles)
    if len(jobs) == 1:
        params = {**plans[0].details["executor"], "slurm_array_parallelism": compute.array_parallelism}
        submitted = {0: make_executor(params, folder, compute.max_requeues).submit(SlurmRank(jobs[0].run_dir))}
    else:
        submitted = {}
        previous: Optional[str] = None
        arrays: List[str] = []
        max_array_size = accounting.limits().max_array_size
        try:
            for group in resource_groups(plans):
                params = {**plans[group[0]].details["executor"], "slurm_array_parallelism": compute.array_parallelism}
                for chunk in array_chunks(len(group), max_array_size):
                    chunk_params = params if previous is None or not compute.array_parallelism else after_array(params, previous)
                    executor = make_executor(chunk_params, folder, compute.max_requeues)
                    with executor.batch():
                        part = {group[i]: executor.submit(SlurmRank(jobs[group[i]].run_dir)) for i in chunk}
                    submitted.update(part)
                    previous = str(next(iter(part.values())).job_id).split("_")[0]
                    arrays.append(previous)
        except Exception:
            # A later array refused (MaxJobCount reached, the controller busy): the sweep is queued whole
            # or not at all, so the arrays already queued are withdrawn before every member ends Failed.
            if arrays:
                accounting.scancel(arrays)
            raise
    ids = [str(submitted[i].job_id) for i in range(len(jobs))]
    for job, record, console, job_id in zip(jobs, records, consoles, ids):
        # one write: the job, and for a detached run that its driver leaves now
        fields: Dict[str, Any] = {"backend_parts": SlurmJob(str(job_id), str(folder)).to_parts(), **with_packages(record, listings)}
        if job.detach:
            fields["detached"] = True
        record.set_status(QUEUED, **fields)
        RunLog(record.log_path(), console).info(f"{QUEUED}: submitted as Slurm job {job_id}", show=True)
    return ids


def check_job_count(members: int, max_job_count: int) -> None:
    """Refuse, before any run folder exists, a sweep the controller could never hold: each member of a job
    array is a job record, and slurmctld refuses a submission that would reach MaxJobCount."""
    if members >= 2 and members >= max_job_count:
        raise ConfigError("compute.pack", f"{members} members would be {members} Slurm jobs, and this cluster "
                                          f"holds fewer than {max_job_count} at once (MaxJobCount, `scontrol show "
                                          f"config`): run them in a few worker jobs with compute.pack=N "
                                          f"(hydra.launcher.pack=N for a plain Hydra app)")


def resource_groups(plans: List[Plan]) -> List[List[int]]:
    """The members' positions grouped by what they ask of Slurm (their executor parameters: a sweep over
    compute.cpus_per_task, mem_gb, gpus_per_node, timeout_min or partition asks differently per member),
    in the order each group first appears: one array per group, each with its own request."""
    groups: Dict[str, List[int]] = {}
    for i, plan in enumerate(plans):
        groups.setdefault(json.dumps(plan.details["executor"], sort_keys=True, default=str), []).append(i)
    return list(groups.values())


def array_chunks(members: int, max_array_size: int) -> List[range]:
    """The members' positions, split into job arrays of at most `max_array_size` tasks (submitit numbers
    each array's tasks from 0, and Slurm wants every index below MaxArraySize)."""
    size = max(1, max_array_size)
    return [range(start, min(members, start + size)) for start in range(0, members, size)]


def after_array(params: Dict[str, Any], array_job_id: str) -> Dict[str, Any]:
    """Executor parameters that also wait for every task of an earlier array to end (whatever its end)."""
    extra = dict(params.get("slurm_additional_parameters") or {})
    dependency = f"afterany:{array_job_id}"
    extra["dependency"] = f"{extra['dependency']},{dependency}" if extra.get("dependency") else dependency
    return {**params, "slurm_additional_parameters": extra}


class _Listing(threading.Thread):
    """The packages of one interpreter, listed in the background while the members are prepared and
    submitted (a listing is a Python process of its own). A member's Queued write takes them when the
    listing is done by then; the listing writes them to the members it was too late for."""

    def __init__(self, interpreter: str) -> None:
        super().__init__(daemon=True)
        self.interpreter = interpreter
        self.packages: Optional[List[str]] = None
        self.done = False
        self.late: List[RunRecord] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        from mltrain.environments import materialize  # startup

        packages = materialize.record_packages(self.interpreter)
        with self.lock:
            self.packages, self.done, late = packages, True, list(self.late)
        if packages is not None:
            for record in late:
                # onto run.json as it is now: a packed member may be running in its worker meanwhile, which has
                # written its worker's job id and Running since this copy was read (a whole-copy write put the
                # record back to Queued's fields: CI saw a Completed member without its job id or Running phase)
                record.update_on_disk(environment={**(record.doc.environment or {}), "packages": packages})

    def take(self, record: RunRecord) -> Dict[str, Any]:
        """The fields a member's next write adds for its packages: now, or later by the listing itself."""
        with self.lock:
            if not self.done:
                self.late.append(record)
                return {}
        return {"environment": {**(record.doc.environment or {}), "packages": self.packages}} if self.packages else {}


def prepare(jobs: List[FrozenJob], records: List[RunRecord], consoles: List[Console],
            made: Optional[Dict[str, Tuple[Dict[str, Any], List[str]]]] = None,
            listings: Optional[Dict[str, _Listing]] = None) -> Dict[str, _Listing]:
    """Preparing, for every member: each distinct environment is made ready once (a sweep's members share
    theirs; what doing so logged goes to every member's log) and each member's run.json takes the status
    and the environment in one write. The interpreters' packages are listed once each, in the background;
    returns those listings by interpreter, for the Queued write. What base.prepare_environment does for one
    run, without its three writes and a thread per member. `made` and `listings` carry both across calls
    for a sweep prepared in parts (a packed sweep's first members run while the others are prepared)."""
    from mltrain.environments import materialize  # startup
    from mltrain.environments.spec import EnvironmentSpec  # startup

    made = {} if made is None else made
    listings = {} if listings is None else listings
    for job, record, console in zip(jobs, records, consoles):
        log = RunLog(record.log_path(), console)
        if not job.environment:
            record.set_status(PREPARING)
            log.info(PREPARING, show=True)
            continue
        key = json.dumps(job.environment, sort_keys=True, default=str)
        if key in made:
            record.set_status(PREPARING, environment=dict(made[key][0]))
            log.info(PREPARING, show=True)
            for text in made[key][1]:
                log.info(text, show=True)
            continue
        record.set_status(PREPARING)
        log.info(PREPARING, show=True)
        said: List[str] = []

        def say(text: str, log: RunLog = log, said: List[str] = said) -> None:
            said.append(text)
            log.info(text, show=True)

        spec = EnvironmentSpec(**job.environment["spec"])
        info = materialize.materialize(spec, job.environment["containerized"], job.environment.get("check", "error"), say)
        made[key] = (info, said)
        record.update(environment=dict(info))
        interpreter = str(info["interpreter"])
        if not job.environment["containerized"] and interpreter not in listings:
            listings[interpreter] = _Listing(interpreter)
            listings[interpreter].start()
    return listings


def with_packages(record: RunRecord, listings: Dict[str, _Listing]) -> Dict[str, Any]:
    """The Queued write's fields for the record's environment: its interpreter's packages if listed by now."""
    listing = listings.get(str((record.doc.environment or {}).get("interpreter")))
    return listing.take(record) if listing is not None else {}


def final_status(record: RunRecord, job: accounting.JobState) -> Tuple[str, Optional[str], Optional[int]]:
    """(status, error, failed rank) of a run whose Slurm job has ended, from the ranks' own reports."""
    state = job.state
    status = accounting.STATES.get(state, FAILED)
    failed_rank, error = reports.failure(record)
    if failed_rank is not None:
        record.update(failed_rank=failed_rank)
        if status == COMPLETED:
            status = FAILED
    elif status != COMPLETED:
        error = f"Slurm job {_job_id(record)} ended {state}" + _why_not_requeued(record)
    if job.state == "NODE_FAIL":  # what the ranks saw (a peer gone, a signal) follows from the lost node
        lost = accounting.lost_nodes(job.nodes)
        where = f"lost node {', '.join(lost)}" if lost else f"a node of {job.nodes or 'its allocation'} lost"
        error = f"Slurm job {_job_id(record)} ended NODE_FAIL: {where}" + node_loss.why_not(record) + (
            f"; {error.split(';')[0]}" if failed_rank is not None and error else "")
    return status, error, failed_rank


def _why_not_requeued(record: RunRecord) -> str:
    """What submitit said when it stopped requeuing (it logs the reason in the task's own log), in
    mltrain's words: the bare Slurm state hides that a preempted or timed-out job ran out of requeues."""

    for log in sorted((record.dir / "submitit").glob("*_log.*")):
        try:
            text = log.read_text(errors="replace")
        except OSError:
            continue
        found = re.findall(r"Job not requeued because: ([^\n]*?)\.?$", text, re.MULTILINE)
        if found:
            reason = found[-1]
            if "too many times" in reason:
                limit = compute_as(FrozenJob.load(record.dir).compute, SlurmComputeConf).max_requeues
                return f": it timed out too many times (compute.max_requeues={limit} requeue(s) used up; submitit: {reason})"
            return f": not requeued ({reason})"
    return ""


def backend_time(when: Optional[float], record: RunRecord, live: bool) -> Optional[float]:
    """When a change happened. Accounting counts whole seconds: a driver watching live keeps its own
    finer clock; a later look takes accounting's, never earlier than the run's last phase."""
    if when is None or (live and time.time() - when < 2.0):
        return None
    return max(when, max(record.doc.phases.values()))


def settle(record: RunRecord, job: accounting.JobState, console: Optional[Console] = None, live: bool = False,
           before_end: Callable[[], None] = lambda: None, canceled: Optional[str] = None) -> bool:
    """Apply what accounting says to one run: Running, or its end (output first, then Finalizing); True once it
    has ended. `canceled` is the reason when mltrain itself stopped the job. A lost node (NODE_FAIL) is replaced
    where it can be (node_loss): the run goes on, Queued again. A loss Slurm repaired before this look is recorded."""
    if canceled is None and slurm_job(record) is not None:
        job = node_loss.look_back(record, job, _job_id(record), console)
    if job.state == "NODE_FAIL" and canceled is None and slurm_job(record) is not None:
        entry = node_loss.recorded(record, job)
        if entry is not None and node_loss.replaced(entry):
            return False  # replaced already: accounting says NODE_FAIL until the job runs again
        said = node_loss.replace(record, job, _job_id(record)) if entry is None else None
        if said is not None:
            RunLog(record.log_path(), console).info(said, show=True)
            return False
    status = job.status
    if status == RUNNING or (status in TERMINAL and job.start is not None):
        mark_running(record, console, backend_time(job.start, record, live))
    if status in TERMINAL:
        before_end()
        if job.state == "NODE_FAIL" and slurm_job(record) is not None:
            # Slurm requeues it to wait for a node that may never return; the run ends here, so the job too
            accounting.scancel([_job_id(record)])
        result, error, failed_rank = final_status(record, job)
        if canceled and result != COMPLETED:
            if reports.ended_by_themselves(record.dir, record.doc.world.world_size):
                # the cancel came as the ranks ended by themselves, each exit 0: it stopped nothing, and `runs
                # resume` must not run the work again (the campaign's seed 7: a sweep's Ctrl-C as a member ended)
                result, error = COMPLETED, None
                RunLog(record.log_path(), console).info(
                    "every rank had ended by itself with exit code 0 before the cancel reached it", show=False)
            else:
                result, error = CANCELED, canceled
        finish(record, result, error, failed_rank, console, at=backend_time(job.end, record, live))
        return True
    return False


def mark_running(record: RunRecord, console: Optional[Console], at: Optional[float] = None) -> None:
    # once only, but again after a lost node's replacement made the run Queued again (node_loss)
    if RUNNING in record.doc.phases and record.status != QUEUED:
        return
    record.set_status(RUNNING, at=at)
    RunLog(record.log_path(), console).info(RUNNING, show=True)


class _Stream:
    """Follows one rank's log and shows its whole lines: the last line read may still be being written (a
    read can end anywhere in a write, on a shared file system above all), so a part of a line waits for its
    end, or for the rank's end (`final`)."""

    def __init__(self, path: Path, on_line: Callable[[str], None]) -> None:
        self.path, self.on_line = path, on_line
        self.offset, self.pending = 0, b""

    def has_new(self) -> bool:
        try:
            return os.stat(self.path).st_size > self.offset
        except OSError:
            return False

    def pump(self, final: bool = False) -> bool:
        chunk, self.offset = follow(self.path, self.offset)
        *lines, self.pending = (self.pending + chunk).split(b"\n")
        if final and self.pending:
            lines, self.pending = lines + [self.pending], b""
        for line in lines:  # the rank's wrapper wrote each line's final frame only (process.copy_output)
            self.on_line(line.decode("utf-8", "replace"))
        return bool(chunk)


def rank_streams(plan: Plan, record: RunRecord, console: Console) -> List[_Stream]:
    """The rank logs a run shows on the console (job.console: rank 0, all, none), followed as they grow."""
    job = plan.job
    if job.console == "none":
        return []
    ranks = range(job.world_size) if job.console == "all" else [0]
    return [_Stream(record.log_path(r), console.rank_lines(r)) for r in ranks]


def wait(plans: List[Plan], records: List[RunRecord], ids: List[str], consoles: List[Console],
         cancel: threading.Event) -> List[str]:
    """Follow every run to its end; on cancel, scancel them all. Returns final statuses.

    The ranks' own reports say first that a run started and that every rank ended well (accounting
    lags behind the job by up to seconds); they are looked at every tick. Accounting settles the
    rest: it is asked every compute.poll_s while the reports cannot tell (a rank failed, a cancel is
    under way), and every SAFETY_POLLS x poll_s otherwise (a job cancelled from outside, a time
    limit, a node failure, a requeue), backing off to SAFETY_BACKOFF times that while its answers
    add nothing to the reports. Each `sacct` is a process and a database query; on a busy node they
    compete with the ranks, and on a shared cluster with everyone's.
    """
    streams = [rank_streams(p, r, c) for p, r, c in zip(plans, records, consoles)]
    poll = compute_as(plans[0].job.compute, SlurmComputeConf).poll_s
    tick = min(poll, TICK_S)
    open_ = {i for i, r in enumerate(records) if r.status not in TERMINAL}  # an early cancel ended some already
    canceled = False
    asked = time.monotonic() - (SAFETY_POLLS - 1) * poll  # the first look is one poll_s after the submit
    safety = SAFETY_POLLS * poll  # the interval while the reports tell (backs off: SAFETY_BACKOFF)
    silent = 0  # accounting queries in a row that got no answer
    while open_:
        if cancel.is_set() and not canceled:
            accounting.scancel([ids[i] for i in open_])
            canceled = True
        states = {}
        now = time.monotonic()
        seen = {i: reports.read_now(records[i].dir) for i in open_}
        urgent = canceled or any(reports.any_failed(seen[i]) for i in open_)
        # no answer (slurmdbd away): asked again soon, then less often, never read as an end
        interval = poll if urgent else (safety if not silent else min(SAFETY_POLLS, 2 ** (silent - 1)) * poll)
        if now >= asked + interval:
            # an answer another follower in this process got within this interval serves here too (SharedQuery)
            states = accounting.query_shared([ids[i] for i in open_], fresh_s=interval)
            asked = now
            silent = 0 if states else silent + 1
        told = False  # whether accounting ended a run the reports had not
        for i in sorted(open_):
            record, console, job = records[i], consoles[i], plans[i].job

            def flush(i: int = i) -> None:
                for s in streams[i]:
                    s.pump(final=True)

            if RUNNING not in record.doc.phases and (seen[i] or any(s.has_new() for s in streams[i])):
                mark_running(record, console)  # the ranks say it runs before accounting does
            for s in streams[i]:
                s.pump()
            if not canceled and reports.ended_well(record.dir, job.world_size, seen[i]):
                settle(record, accounting.JobState("COMPLETED"), console, live=True, before_end=flush)
                open_.discard(i)
                continue
            state = states.get(ids[i])
            if state is None:
                continue
            if canceled and state.state == "UNKNOWN":
                state = accounting.JobState("CANCELLED")
            if not canceled and state.status not in TERMINAL and state.node_fails:
                state = node_loss.look_back(record, state, ids[i], console)  # a loss Slurm repaired since the last look
            if state.status in TERMINAL:
                if settle(record, state, console, live=True, before_end=flush,
                          canceled=cancel_reason(cancel) if canceled else None):
                    open_.discard(i)
                told = True
            elif state.status == RUNNING:
                mark_running(record, console)  # the ranks' first report would say so within a second
        if states:
            safety = SAFETY_POLLS * poll if told else min(2 * safety, SAFETY_BACKOFF * SAFETY_POLLS * poll)
        if open_:
            time.sleep(tick)
    return [r.status for r in records]


def _job_id(record: RunRecord) -> str:
    job = slurm_job(record)
    return job.job_id if job is not None else "?"
