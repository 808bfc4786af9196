"""The driver's side of packing (mltrain.backends.slurm.pack says what packing is): queue a sweep's
members, keep workers for them, follow them to their ends, cancel them; and `runs status|cancel` of
one packed member from any process."""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from mltrain.backends.base import Plan, driver_alive
from mltrain.backends.handover import cancel_reason
from mltrain.backends.slurm import driver
from mltrain.backends.slurm.pack import (
    DEFERRED,
    STALE_S,
    STOPPED,
    claim,
    end_queued,
    enqueue,
    entry_names,
    is_deferred,
    pack_part,
    packed_in,
    release,
    worker_submission,
)
from mltrain.backends.slurm.pack_pool import Pool, pool_for, saved_pool
from mltrain.backends.slurm.run_part import NAME
from mltrain.backends.slurm.submission import sbatch_script
from mltrain.base.atomic import atomic_write_bytes
from mltrain.base.errors import ConfigError
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.schema import compute_as
from mltrain.jobspec.slurm_compute import SlurmComputeConf
from mltrain.jobspec.status import CANCELED, FAILED, QUEUED, RUNNING, TERMINAL
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: Seconds the workers are given to stop the members of a canceled sweep before they are scancelled.
CANCEL_GRACE_S = 30.0
TICK_S = 0.1


def packs(job: FrozenJob) -> bool:
    """Whether this run is a sweep member to be packed."""
    return bool(compute_as(job.compute, SlurmComputeConf).pack) and job.sweep_dir is not None


def check(job: FrozenJob) -> None:
    c = compute_as(job.compute, SlurmComputeConf)
    if c.pack_slots < 1:
        raise ConfigError("compute.pack_slots", f"{c.pack_slots} is invalid; must be >= 1")
    if c.pack_slots > 1 and not c.pack:
        raise ConfigError("compute.pack_slots", f"{c.pack_slots} slots are a packed worker's: set compute.pack too "
                                                "(the number of worker jobs)")
    if packs(job) and job.world_size > 1:
        raise ConfigError("compute.pack", f"packs single-process members; this sweep's members have "
                                          f"{job.world_size} ranks (set compute.pack=0 to give each its own Slurm job)")


def member_gpus(params: Dict[str, Any]) -> int:
    """The GPUs one single-process member asks for, per node or per task."""
    return int(params.get("gpus_per_node") or 0) or int(params.get("slurm_gpus_per_task") or 0)


def worker_params(plan: Plan) -> Dict[str, Any]:
    """A worker's Slurm request: what one member asks for, as one task, under the sweep's name; with
    compute.pack_slots=K, K times its GPUs, CPUs and memory (mltrain.backends.slurm.pack_slots)."""
    params = {k: v for k, v in plan.details["executor"].items() if k != "slurm_array_parallelism"}
    params.update(nodes=1, tasks_per_node=1, name=f"{plan.job.experiment}-pack")
    slots = compute_as(plan.job.compute, SlurmComputeConf).pack_slots
    if slots > 1:
        gpus = member_gpus(params)
        params.pop("slurm_gpus_per_task", None)  # one task holds every slot's GPUs
        params.pop("gpus_per_node", None)
        if gpus:
            params["gpus_per_node"] = gpus * slots
        params["cpus_per_task"] = int(params["cpus_per_task"]) * slots
        if params.get("mem_gb") is not None:
            params["mem_gb"] = float(params["mem_gb"]) * slots
        # the worker's one task keeps all its GPUs; the slots, not Slurm, share them out
        params["slurm_srun_args"] = [a for a in params["slurm_srun_args"] if not a.startswith("--gpu-bind")]
    return params


def queue_of(plan: Plan) -> Path:
    """The queue of the member's resource group: members asking for the same resources share workers."""
    digest = hashlib.sha1(json.dumps(worker_params(plan), sort_keys=True, default=str).encode()).hexdigest()[:10]
    assert plan.job.sweep_dir is not None
    return Path(plan.job.sweep_dir) / "pack" / digest


def describe(plan: Plan) -> List[str]:
    c = compute_as(plan.job.compute, SlurmComputeConf)
    where = queue_of(plan)
    params = worker_submission(where, worker_params(plan), record=False)
    script = sbatch_script(params, where / "submitit", c.max_requeues)
    slots: List[str] = []
    if c.pack_slots > 1:
        from mltrain.backends.slurm.pack_slots import deal  # startup

        slots = [f"each worker runs {c.pack_slots} members at once, one per slot; a member takes the first slot "
                 "free, and its CUDA_VISIBLE_DEVICES is that slot's share of the worker's:",
                 *("  " + line for line in deal(c.pack_slots, member_gpus(plan.details["executor"])))]
    return [f"packed (compute.pack={c.pack}): this member is queued in {where}/todo, in the sweep's order; up to "
            f"{c.pack} worker jobs each take the next member when one ends, and leave when the queue stays empty",
            *slots, "a worker's sbatch script:", *("  " + line for line in script.splitlines())]


def launch(plans: List[Plan], records: List[RunRecord], consoles: List[Console], cancel: threading.Event) -> List[str]:
    jobs = [p.job for p in plans]
    compute = compute_as(jobs[0].compute, SlurmComputeConf)
    names = entry_names(len(plans))
    queues = [queue_of(p) for p in plans]
    pools: Dict[Path, Pool] = {}
    for plan, queue in zip(plans, queues):
        if queue not in pools:
            pools[queue] = pool_for(queue, worker_params(plan), compute.pack, compute.max_requeues, compute.pack_slots)
    made: Dict[str, Tuple[Dict[str, Any], List[str]]] = {}
    listings: Dict[str, Any] = {}
    for part in _parts(len(plans), compute.pack):
        listings = driver.prepare([jobs[i] for i in part], [records[i] for i in part], [consoles[i] for i in part],
                                  made, listings)
        for i in part:
            record, console, queue = records[i], consoles[i], queues[i]
            fields: Dict[str, Any] = {"backend_parts": {NAME: pack_part(queue, names[i])},
                                      **driver.with_packages(record, listings)}
            if jobs[0].detach:
                fields["detached"] = True
            record.set_status(QUEUED, **fields)
            RunLog(record.log_path(), console).info(f"{QUEUED}: packed, in {queue}", show=True)
        for queue in pools:
            members = [i for i in part if queues[i] == queue]
            enqueue(queue, [names[i] for i in members], [jobs[i].run_dir for i in members])
        if part.start > 0:
            continue
        try:  # the workers start on the first members while the others are queued
            for pool in pools.values():
                pool.tend()
        except Exception as exc:  # no worker reached the cluster: the members end Failed, here
            reason = " ".join(f"submission to Slurm failed: {exc}".split())
            for pool, queue in zip(pools.values(), pools):
                pool.cancel_queued([names[i] for i in part if queues[i] == queue], reason, FAILED)
            for record in records[part.stop:]:  # never queued
                finish(record, FAILED, reason)
            for record, console in zip(_reloaded(records), consoles):
                console.status(f"{record.status}: {record.error}")
            return [r.status for r in records]
    if jobs[0].detach:
        for plan, console in zip(plans, consoles):
            console.status(f"detached: run {plan.job.run_id} is packed; follow it with "
                           f"`mltrain runs status|logs|cancel {plan.job.run_id}`")
        return [QUEUED] * len(plans)
    for pool in pools.values():
        pool.following += 1
    try:
        return follow(plans, records, consoles, names, queues, pools, cancel)
    finally:
        for pool in pools.values():
            pool.following -= 1
            if len(plans) > 1 and not pool.following:  # a plain sweep's members, all queued at once, have ended
                pool.close()


def _parts(members: int, workers: int) -> List[range]:
    """The members in the parts they are queued in: first enough for every worker twice over, whose workers are
    submitted then, so that they start on those while the driver queues the others (4 ms a member: 4 s of a
    1,000-member sweep, before any worker was asked for), in parts small enough that the queue never runs dry."""
    first = min(members, max(2 * workers, 16))
    return [range(0, first)] + [range(start, min(members, start + 64)) for start in range(first, members, 64)]


def defer(queue: Path, specs: List[str], maker: bytes) -> None:
    """Queue members that the worker taking each makes (mltrain.launch.deferred): their maker once, then one
    entry per member's spec, after every member queued before."""
    atomic_write_bytes(queue / DEFERRED, maker)
    enqueue(queue, entry_names(len(specs)), specs)


def cancel_queues(sweep_dir: Path, reason: str, settle_s: float = 10.0) -> Tuple[List[str], List[Path]]:
    """`runs cancel SWEEP` of a packed sweep: its workers take no more members, those no worker took end here
    (a deferred one is never made). Returns (run ids of the deferred members dropped, run folders of the
    members workers hold: the caller cancels those as any run)."""
    dropped: List[str] = []
    held: List[Path] = []
    queues = [q for q in sorted((sweep_dir / "pack").glob("*")) if (q / "todo").is_dir()]
    for queue in queues:
        (queue / STOPPED).touch()
        never_made = end_queued(queue, sorted(os.listdir(queue / "todo")), "canceller", reason)
        dropped += [str(json.loads(spec)["run_id"]) for spec in never_made]
    deadline = time.monotonic() + settle_s
    for queue in queues:
        for name in os.listdir(queue / "claimed"):
            path = queue / "claimed" / name
            content = ""
            while time.monotonic() < deadline:  # a deferred member its worker is making: its folder, once made
                try:
                    content = path.read_text(encoding="utf-8")
                except FileNotFoundError:  # ended meanwhile
                    content = ""
                    break
                if not is_deferred(content):
                    break
                time.sleep(0.05)
            if content and not is_deferred(content):
                held.append(Path(content))
    return dropped, held


def _reloaded(records: List[RunRecord]) -> List[RunRecord]:
    for record in records:
        record.reload()
    return records


def follow(plans: List[Plan], records: List[RunRecord], consoles: List[Console], names: List[str],
           queues: List[Path], pools: Dict[Path, Pool], cancel: threading.Event) -> List[str]:
    """Follow the members to their ends: the queue folders say which one started and which ended (a
    listing per tick; a run.json is read only when its member moved), the rank logs are shown as they grow."""
    streams = [driver.rank_streams(p, r, c) for p, r, c in zip(plans, records, consoles)]
    open_ = set(range(len(plans)))
    running: Set[int] = set()
    where = {(q, n): i for i, (q, n) in enumerate(zip(queues, names))}
    deadline: Optional[float] = None
    while open_:
        if cancel.is_set() and deadline is None:
            reason = cancel_reason(cancel)
            for i in open_:
                records[i].request_cancel(reason)
            for queue, pool in pools.items():
                pool.cancel_queued([names[i] for i in open_ if queues[i] == queue], reason)
            deadline = time.monotonic() + CANCEL_GRACE_S
        for pool in pools.values():
            pool.tend()
        claimed = {q: {n.partition("@")[0] for n in os.listdir(q / "claimed")} for q in pools}
        done = {q: set(os.listdir(q / "done")) for q in pools}
        # only the members a worker holds or has ended can have moved: 1,000 queued members looked at 10 times a
        # second were the driver's CPU, which the workers on the same cores need
        moved = running | {where[q, n] for q in pools for n in claimed[q] | done[q] if (q, n) in where}
        for i in sorted(open_ & moved):
            queue, name, record, console = queues[i], names[i], records[i], consoles[i]
            if i not in running and name in claimed[queue] and name not in done[queue]:
                record.reload()  # its worker says Running once it has started the member
                if RUNNING in record.doc.phases and record.status not in TERMINAL:
                    running.add(i)
                    console.status(f"{RUNNING} (in packed Slurm job {record.scheduler_job_id})")
            elif i in running and name not in claimed[queue] and name not in done[queue]:
                running.discard(i)  # back in the queue: its worker was lost
                console.status(f"{QUEUED} again: its worker was lost")
            if i in running or name in done[queue]:  # a queued member has no output yet: not looked at
                for s in streams[i]:
                    s.pump(final=name in done[queue])
            if name in done[queue]:
                record.reload()
                _say_end(record, console)
                open_.discard(i)
        if deadline is not None and time.monotonic() > deadline and open_:
            for pool in pools.values():
                pool.stop()
            for i in open_:
                records[i].reload()
                if records[i].status not in TERMINAL:
                    finish(records[i], CANCELED, cancel_reason(cancel) + " (its worker did not stop it; scancel)",
                           console=consoles[i])
            break
        if open_:
            time.sleep(TICK_S)
    return [r.status for r in records]


def _say_end(record: RunRecord, console: Console) -> None:
    ran, waited = record.times()
    waited_text = f", after {waited:.1f}s waiting" if waited >= 0.05 else ""
    console.status(f"{record.status} in {ran:.1f}s{waited_text}  {record.dir}")
    if record.error and record.status == FAILED:
        console.status(record.error)


def cancel(record: RunRecord, reason: str = "canceled by the user", wait_s: float = CANCEL_GRACE_S) -> None:
    """`runs cancel MEMBER` of a packed member: ended here if no worker has taken it, else its worker stops it."""
    where = packed_in(record)
    assert where is not None
    queue, entry = where
    record.request_cancel(reason)
    taken = claim(queue, "canceller", entry)
    if taken is not None:
        record.reload()
        if record.status not in TERMINAL:
            finish(record, CANCELED, reason)
        release(queue, entry, "canceller")
        return
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        record.reload()
        if record.status in TERMINAL:
            return
        time.sleep(0.1)


def take_back(record: RunRecord) -> bool:
    """A packed member still in its queue (no worker took it) when its driver died: out of the queue, for the
    resuming driver to queue it again and keep workers for it. The dead driver may have queued it and died
    before submitting a worker, and a worker submitted may never come: left in the queue, it could wait forever.
    So too a member the dead driver recorded Queued and died before queuing (its entry is nowhere). False if a
    worker has it (or it has ended): the resuming process follows it, and keeps the queue's workers from then on
    (`refresh`), since a worker stopped under it puts it back in the queue, where only a worker takes it."""
    where = packed_in(record)
    if where is None or driver_alive(record):
        return False
    queue, entry = where
    if claim(queue, "resume", entry) is not None:
        (queue / "claimed" / f"{entry}@resume").unlink()
        return True
    if not _queued(queue, entry):
        return True
    pool = saved_pool(queue)
    if pool is not None:
        _tended[str(queue)] = pool
    return False


#: The queues whose members this process follows for a driver that died (take_back): it keeps their workers.
_tended: Dict[str, Pool] = {}


def _queued(queue: Path, entry: str) -> bool:
    """Whether the entry is in its queue (waiting, taken or done): an entry moves by rename, so it is always in
    one of the three once queued, and nowhere if its driver died before queuing it. Looked at in the order it
    moves (a worker may be moving it meanwhile: taken, done, or back to wait), twice, so that a move between
    two looks does not hide it."""
    for _ in range(2):
        try:
            if any(n.partition("@")[0] == entry for n in os.listdir(queue / "claimed")):
                return True
        except FileNotFoundError:
            return False
        if (queue / "done" / entry).exists() or (queue / "todo" / entry).exists():
            return True
    return False


def refresh(record: RunRecord) -> None:
    """A packed member whose driver is gone and whose worker left or was lost before it ended: Failed."""
    where = packed_in(record)
    if where is None or record.status in TERMINAL or driver_alive(record):
        return
    queue, entry = where
    tended = _tended.get(str(queue))
    if tended is not None:  # a worker stopped under it puts it back in the queue: one must come for it
        tended.tend()
    owners = [n.partition("@")[2] for n in os.listdir(queue / "claimed") if n.partition("@")[0] == entry]
    if not owners:
        return  # still queued (a worker will take it) or just done (its record says so next look)
    workers = queue / "workers"
    owner = owners[0]
    try:
        beat = (workers / f"{owner}.alive").stat().st_mtime
    except FileNotFoundError:
        beat = 0.0
    if time.time() - beat <= STALE_S and not (workers / f"{owner}.gone").exists():
        return
    from mltrain.backends.slurm import accounting  # startup

    state = accounting.query([owner]).get(owner)
    if state is not None and state.status in TERMINAL:
        record.reload()
        if record.status not in TERMINAL:
            finish(record, FAILED, f"its worker, Slurm job {owner}, ended {state.state} before it did")
