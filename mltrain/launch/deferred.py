"""Deferred members: a detached, packed sweep over values has its members made by the Slurm workers that run
them, not by its driver (issue 36: 10,000 members queued in seconds, where making each run folder first
took 18 ms a member and holding every composed config 1.6 GB).

The driver composes, freezes and queues the first member as any other (its config is checked, its run folder
and environment are made, the workers are submitted). The others are queued as specs, `{index, run_id,
overrides}`, one entry each in the pack's queue (mltrain.backends.slurm.pack), beside one pickled
`MemberMaker`: the command's composed config and the first member's frozen shape. A worker that takes such an
entry makes the member there, as the driver would have (a copy of the composed config with the member's
values, frozen, its run folder and run.json, Queued in the same queue), and runs it.

Only what cannot change a member's resources, environment, ranks or folders is deferred: a sweep over values
of keys outside `BLOCKED`, whose first member was made from the command's composed config without composing
(mltrain.config.compose._from_master). A deferred member's source snapshot is a copy of the first member's,
taken by the driver: editing the source while members wait changes nothing, as for eager members. Other
sweeps are made eagerly, every member before the first starts.

Before anything is queued, every swept value is applied to a copy of the first member's config
(`check_values`): a value the config refuses (no such key, the wrong type) stops the sweep in one line, as for
eager members. What only freezing a member finds (a value of the wrong type for the job's schema, a check across values) is
found by its worker when the member starts: that member ends Failed with the reason, in a run folder of its
own, and the worker takes the next.
"""
from __future__ import annotations

import dataclasses
import json
import os
import pickle
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Set

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import setup_globals
from omegaconf import DictConfig

from mltrain.backends.slurm import pack_driver
from mltrain.backends.slurm.pack import pack_part, packed_in
from mltrain.backends.slurm.run_part import NAME
from mltrain.config.compose import compose_value_member, is_mltrain_config, master_bases
from mltrain.config.hydra_internals import apply_value_overrides
from mltrain.config.messages import user_error
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.records import SweepRef
from mltrain.jobspec.status import FAILED, NOT_STARTED, QUEUED
from mltrain.launch.freeze import freeze_member, member_run_id
from mltrain.launch.orchestrate import create_run, execute, print_summary, write_sweep_summary
from mltrain.runs.console import Console, RunLog
from mltrain.runs.lifecycle import finish
from mltrain.runs.record import RunRecord

#: Keys whose values would change a member's Slurm request, environment, ranks, folders or kind of command.
BLOCKED = ("compute", "distribution", "environment", "run", "experiment_name", "job.source_directory", "hydra",
           "dry_run", "sweep", "pipeline")


def swept_keys(job_overrides: Sequence[Sequence[str]]) -> Optional[Set[str]]:
    """The keys whose values differ between members, or None when members differ in which keys they set."""
    first = list(job_overrides[0])
    keys = [line.split("=", 1)[0] for line in first]
    swept: Set[str] = set()
    for overrides in job_overrides[1:]:
        if len(overrides) != len(first):
            return None
        for line, line0, key in zip(overrides, first, keys):
            if line != line0:
                if not line.startswith(key + "=") or key.startswith("~"):
                    return None
                swept.add(key.lstrip("+~"))
    return swept


def deferrable(cfg: DictConfig, job: FrozenJob, job_overrides: Sequence[Sequence[str]], bases: Dict[Any, Any]) -> bool:
    """Whether the members after the first (`cfg`, `job`) can be made by their workers."""
    if len(job_overrides) < 2 or not is_mltrain_config(cfg) or cfg.dry_run or not job.detach:
        return False
    if not pack_driver.packs(job) or not bases.get("last_from_master"):
        return False
    keys = swept_keys(job_overrides)
    return keys is not None and not any(blocked(k) for k in keys)


def blocked(key: str) -> bool:
    """Whether sweeping `key` can change what the driver made once for all members (BLOCKED)."""
    return any(key == b or key.startswith(b + ".") for b in BLOCKED)


def check_values(cfg: DictConfig, job_overrides: Sequence[Sequence[str]]) -> None:
    """Every swept value applied to a copy of the first member's config as Hydra applies it (the key exists,
    the value fits its type), so that a value the config refuses stops the sweep before anything is queued,
    as it does eager members; freeze's own checks of a member run in its worker."""
    first = job_overrides[0]
    lines = {line for overrides in job_overrides[1:] for line, line0 in zip(overrides, first) if line != line0}
    # `+key=v` and `++key=v` set a key the first member has already: as changes, each value can be tried in turn
    changes = sorted({line.lstrip("+") for line in lines})
    probe = pickle.loads(pickle.dumps(cfg))
    for override in OverridesParser.create().parse_overrides(changes):
        apply_value_overrides([override], probe)


@dataclass
class MemberMaker:
    """Pickled into the queue folder by the driver; called by a worker for each deferred entry it takes."""

    bases: Dict[str, Any]
    shapes: Dict[str, Any]
    runs_root: str
    first_run_dir: str
    first_snapshot: str
    queue: str
    # Relative paths in the members' configs are read from the worker's folder, which is the driver's: Slurm
    # starts every worker of the queue there (mltrain.backends.slurm.pack.DRIVER_CWD). No os.chdir here: a
    # worker's GPU slots are threads, and one slot's change of folder would move the others'.

    def __call__(self, spec: Dict[str, Any], entry: str) -> str:
        index = int(spec["index"])
        setup_globals()  # Hydra's resolvers (`now`, `hydra`), as in the driver
        try:
            cfg = compose_value_member(self.bases, [str(o) for o in spec["overrides"]], index)
            job = freeze_member(cfg, self.runs_root, sweep_index=index, shapes=self.shapes, run_id=str(spec["run_id"]))
        except Exception as exc:
            refused = user_error(exc)
            if refused is None:  # a defect, not the member's config: the worker reports it
                raise
            return self._refused(spec, entry, str(refused))
        if job.snapshot_source:  # the source as the driver saw it: a copy of the first member's snapshot
            job = dataclasses.replace(job, snapshot_source=self.first_snapshot)
        console = Console(prefix=f"[#{index}] ")
        record = create_run(job, console)
        first = RunRecord.load(self.first_run_dir)  # its environment was made ready (and listed) by the driver
        record.set_status(QUEUED, environment=dict(first.doc.environment), detached=True,
                          backend_parts={NAME: pack_part(Path(self.queue), entry)})
        RunLog(record.log_path(), console).info(f"{QUEUED}: packed, in {self.queue}; made by its worker")
        return job.run_dir

    def _refused(self, spec: Dict[str, Any], entry: str, error: str) -> str:
        """A member whose config freezing refused (what the driver's check could not see): a run folder of its
        own, Failed with the reason, as an eager sweep's member shows it, without a job.json (nothing to run
        or resume). Its record's other fields are the first member's, which it shares all but values with."""
        first = RunRecord.load(self.first_run_dir)
        run_dir = Path(self.first_run_dir).parent / str(spec["run_id"])
        for sub in ("logs", "outputs"):
            (run_dir / sub).mkdir(parents=True)
        now = time.time()
        doc = dataclasses.replace(
            first.doc, id=str(spec["run_id"]), status=NOT_STARTED, created=now, phases={NOT_STARTED: now},
            host=socket.gethostname(), driver_pid=os.getpid(), command=[], cwd=str(run_dir),
            overrides=[str(o) for o in spec["overrides"]], sweep=SweepRef(first.doc.sweep.dir, int(spec["index"])),
            ranks={}, error=None, failed_rank=None, outputs=None, attempts=[], snapshot=None, mlflow=None,
            backend_parts={NAME: pack_part(Path(self.queue), entry)}, script_params={}, extra={})
        record = RunRecord(run_dir, doc)
        record.save()
        finish(record, FAILED, f"this member's config was refused: {error}")
        return str(run_dir)


def launch(cfg: DictConfig, job: FrozenJob, job_overrides: Sequence[Sequence[str]], initial_job_idx: int,
           bases: Dict[Any, Any], shapes: Dict[str, Any], runs_root: str) -> List[Dict[str, Any]]:
    """Make and queue the first member, then queue the others as specs for their workers; returns at once
    (the sweep is detached), with one summary row per member ({index, run_id, status, run_dir, overrides})."""
    console = Console(prefix=f"[#{job.sweep_index}] ")
    record = create_run(job, console)
    status = execute([job], [record], [console])[0].status
    record.reload()
    where = packed_in(record)
    ids = _run_ids(cfg, job, len(job_overrides))
    root = Path(job.run_dir).parent
    rows: List[Dict[str, Any]] = [{"index": initial_job_idx, "run_id": job.run_id, "status": status, "run_dir": job.run_dir,
             "overrides": list(job_overrides[0])}]
    if status == QUEUED and where is not None:
        queue = where[0]
        maker = MemberMaker(master_bases(bases, str(job.sweep_dir)), shapes, runs_root, job.run_dir, job.cwd, str(queue))
        specs = [json.dumps({"index": initial_job_idx + i, "run_id": ids[i], "overrides": list(job_overrides[i])})
                 for i in range(1, len(job_overrides))]
        pack_driver.defer(queue, specs, pickle.dumps(maker))
        Console().status(f"detached: {len(specs)} more members are queued in {queue}/todo; the worker that takes "
                         "each makes its run folder then (`mltrain runs list` shows them as they start)")
        later = QUEUED
    else:  # the first member could not be queued (no worker reached Slurm): the others are never made
        later = status
    rows += [{"index": initial_job_idx + i, "run_id": ids[i], "status": later, "run_dir": str(root / ids[i]),
              "overrides": list(job_overrides[i])} for i in range(1, len(job_overrides))]
    write_sweep_summary(job.sweep_dir, rows)
    print_summary(rows, Console())
    return rows


def _run_ids(cfg: DictConfig, job: FrozenJob, count: int) -> List[str]:
    """Each member's run id, given now so that the sweep's summary names every member's folder: as freeze
    names them (`run.id` and the index, or the experiment, the time and 3 random bytes), without repeats."""
    first = job.sweep_index or 0
    seen = {job.run_id}
    ids = [job.run_id]
    while len(ids) < count:
        run_id = member_run_id(cfg.run.id, job.experiment, first + len(ids))
        if run_id not in seen:  # `run.id` with an index never repeats; 3 random bytes can, within one second
            seen.add(run_id)
            ids.append(run_id)
    return ids
