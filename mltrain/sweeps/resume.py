"""`mltrain runs resume SWEEP`: a HyperDrive sweep whose driver died (kill -9, a lost login) or was
canceled goes on from where it stopped, to the same end an uninterrupted sweep with its seed reaches.

The command comes back in through Hydra with the sweep's own overrides from its multirun.yaml (in
the folder it ran from, with hydra.sweep.dir pointing at the sweep), so members are composed as the
first driver composed them; `pending()` tells mltrain.sweeps.run that this is a resume. Then:

- Optuna: the study is loaded from the sweep's journal with the sampler pickled after the last ask
  (Optuna's FAQ way of resuming a study), so the next members are sampled as they would have been.
- members that ended (Completed, Failed, cut by the policy) are kept as sweep.json holds them;
- members in flight are looked at through their backend: one that ended by itself is settled from
  its metrics.jsonl, one still running (a Slurm job) is followed again, one that died with the driver
  ("driver lost") runs again in its own run folder under its own Optuna trial, as `runs resume RUN`
  runs a run again; a member the policy was cutting when the driver died stays cut;
- members of a canceled sweep that the cancel stopped run again the same way, and so do members that Failed
  because the device was full (the command said: make room, then resume);
- the policy's state (each member's values and the last interval it was judged at) comes from
  sweep.json, so no member is judged twice at one interval.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import pickle
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, List, Optional

from mltrain import backends
from mltrain.backends.handover import Followed
from mltrain.base.atomic import atomic_write
from mltrain.base.errors import MltrainError
from mltrain.config.memory_nodes import current_nodes, write_nodes
from mltrain.config.paths import extra_config_dirs, request_config_dirs
from mltrain.jobspec.job import FrozenJob
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED, TERMINAL
from mltrain.jobspec.sweep_record import MemberRow, SweepDoc
from mltrain.launch.orchestrate import complete_run
from mltrain.runs.console import Console
from mltrain.runs.record import RunRecord
from mltrain.sweeps import results
from mltrain.sweeps.controller import JOURNAL, SAMPLER_FILE, Controller, Member, make_study
from mltrain.sweeps.optuna_internals import running_trial
from mltrain.sweeps.space import override_for

NEEDED = ("multirun.yaml", JOURNAL)
#: The config search path the sweep was composed with (MLTRAIN_CONFIG_PATH), for its resume.
CONFIG_PATH_FILE = "config_path.json"
#: The files of the config options the first command held in memory (a v2 job file's generated groups).
GENERATED_COPY = "generated_config"
#: The sweep a `runs resume SWEEP` command is resuming, for the sweeper it re-enters (this thread only).
_RESUMING: contextvars.ContextVar[Optional[SweepDoc]] = contextvars.ContextVar("mltrain_resuming", default=None)


def _out_of_room(record: RunRecord) -> bool:
    """A member that Failed because the device was full (its rank's write, its log, its record): what the command
    told the user to resume once room is made (chaos seed 14: a member's first `run.log` hit the full disk)."""
    error = record.doc.error or ""
    return "No space left on device" in error or "no space left on device" in error or "[Errno 28]" in error


def locate(ref: str, runs_root: Path) -> Optional[Path]:
    """The sweep folder `ref` names (a folder holding sweep.json, or a sweep's name under
    <runs>/_sweeps), or None: then `ref` is a run."""
    for path in (Path(ref).expanduser(), runs_root / "_sweeps" / ref):
        if (path / results.SWEEP_FILE).is_file():
            return path.resolve()
    return None


@dataclass
class Resumption:
    """How to resume a sweep: the `mltrain -m` overrides it was run with (its folder as hydra.sweep.dir), the
    config folders it was composed with, the folder it ran from (relative paths in its overrides are read from
    there)."""

    doc: SweepDoc
    overrides: List[str]
    config_dirs: List[str]
    cwd: str

    @contextlib.contextmanager
    def context(self) -> Iterator[None]:
        """While the sweep is composed and run again: its config folders searched, the sweeper told."""
        token = _RESUMING.set(self.doc)
        try:
            with extra_config_dirs(self.config_dirs):
                yield
        finally:
            _RESUMING.reset(token)


def prepare(where: Path, runs_root: Path, detach: bool) -> Resumption:
    """What resumes the sweep in `where`, after checking it can be resumed."""
    from omegaconf import OmegaConf  # startup

    doc = results.load(str(where), runs_root)
    name = where.name
    if detach:
        raise MltrainError(f"sweep {name}: a HyperDrive sweep is followed by its controller and cannot be detached "
                           "(run `mltrain runs resume` under nohup instead)")
    if doc.status == COMPLETED:
        why = f" ({doc.stopped_because})" if doc.stopped_because else ""
        raise MltrainError(f"sweep {name} is Completed{why}: nothing to resume (`mltrain runs best {name}` shows it)")
    missing = [f for f in NEEDED if not (where / f).is_file()]
    if missing:
        raise MltrainError(f"sweep {name} cannot be resumed: {' and '.join(missing)} missing from {where}")
    try:
        cfg = OmegaConf.load(where / "multirun.yaml")
        task = [str(o) for o in cfg.hydra.overrides.task]
        own = [str(o) for o in cfg.hydra.overrides.hydra if not str(o).startswith("hydra.sweep.dir=")]
        cwd = str(cfg.hydra.runtime.cwd)
    except Exception as exc:  # a damaged or foreign file: one line, as for any unreadable record
        raise MltrainError(f"sweep {name} cannot be resumed: {where / 'multirun.yaml'} is unreadable ({exc})") from None
    if not Path(cwd).is_dir():
        raise MltrainError(f"sweep {name} cannot be resumed: the folder it ran from, {cwd}, is gone")
    kept = where / CONFIG_PATH_FILE
    dirs = list(json.loads(kept.read_text(encoding="utf-8"))) if kept.is_file() else []
    quoted = str(where) if "'" in str(where) else f"'{where}'"
    return Resumption(doc, [*task, *own, f"hydra.sweep.dir={quoted}"], dirs, cwd)


def keep_config_path(sweep_dir: Path) -> None:
    """Record the config search path of a new sweep. Config options this command held in memory (a v2 file's
    generated groups, mltrain.config.memory_nodes) are written into the sweep's folder as the files they
    stand for, and that folder is searched first, as they were."""
    entries = request_config_dirs()
    nodes = current_nodes()
    if nodes:
        copy = sweep_dir / GENERATED_COPY
        write_nodes(nodes, copy)
        entries = [str(copy), *entries]
    if entries:
        atomic_write(sweep_dir / CONFIG_PATH_FILE, json.dumps(entries))


def pending() -> Optional[SweepDoc]:
    """The sweep being resumed by this command, once (None for every other `mltrain -m`)."""
    doc = _RESUMING.get()
    _RESUMING.set(None)
    return doc


class Resumed(Controller):
    """The controller of a sweep that goes on: the first driver's members and study, rebuilt."""

    def __init__(self, doc: SweepDoc, *args: Any) -> None:
        super().__init__(*args)
        self.doc = doc
        self.started = doc.started or self.started
        last = doc.ended or (self.sweep_dir / results.SWEEP_FILE).stat().st_mtime
        self.spent = max(0.0, last - self.started)
        self.rerun = 0

    def _begin(self) -> None:
        from optuna.trial import TrialState  # heavy

        warnings.filterwarnings("ignore", message=".*is already reported.*")  # a rerun logs its steps again
        sampler, asked = self._sampler()
        mend_journal(self.sweep_dir / JOURNAL)
        self.study = make_study(self.settings, self.space, self.sweep_dir, self.seed, sampler, resume=True)
        trials = {t.number: t for t in self.study.get_trials(deepcopy=False)}
        if sampler is not None and asked < len(trials):
            self.console.status("warning: the driver died inside an ask: members still to sample are drawn from the "
                                "sampler's state one trial earlier than the first driver's")
        taken = set()
        for row in sorted(self.doc.members, key=lambda r: r.index):
            number = row.trial if row.trial is not None else row.index
            taken.add(number)
            frozen = trials.get(number)
            if frozen is None:
                self._adopt(row, None)
            else:
                self._adopt(row, running_trial(self.study, frozen) if frozen.state == TrialState.RUNNING
                            else _Told(number))
        keys = {d.key for d in self.space.dimensions}
        for number, frozen in sorted(trials.items()):
            if number in taken or frozen.state != TrialState.RUNNING:
                continue
            if keys <= set(frozen.params):  # asked, but its member was not in sweep.json yet
                trial = running_trial(self.study, frozen)
                record = self._unlisted_run(len(self.members))
                if record is None:
                    self._launch(trial)
                else:  # its run was made just before the driver died: that run goes on, no second one
                    params = {d.key: d.value(trial.params[d.key]) for d in self.space.dimensions}
                    self._adopt(MemberRow(index=len(self.members), run_id=record.doc.id, run_dir=str(record.dir),
                                          params=params, status=record.status, trial=number,
                                          overrides=self.space.fixed + [override_for(k, v) for k, v in params.items()]),
                                trial)
            else:  # the driver died inside the ask
                self.study.tell(number, state=TrialState.FAIL, skip_if_finished=True)
        kept = sum(1 for m in self.members if m.ended is not None)
        self.console.status(f"resumed: {kept} member(s) kept, {self.rerun} run again, "
                            f"{self._in_flight() - self.rerun} followed or started, "
                            f"{max(0, self.total - len(self.members))} to sample")
        results.write(self)

    def _unlisted_run(self, index: int) -> Optional[RunRecord]:
        """The run made for member `index` when the driver died between making it and listing it in
        sweep.json (looked for beside the other members' runs, among those made since the sweep began)."""
        roots = {Path(m.job.run_dir).parent for m in self.members if m.job is not None}
        if not roots:  # the first member's: where the command's runs go
            from omegaconf import OmegaConf  # startup

            roots = {Path(str(OmegaConf.select(self.composer.config, "run.root"))).expanduser()}
        since = self.started - 1
        for root in roots:
            for path in root.glob("*/run.json"):
                try:
                    if path.stat().st_mtime < since:
                        continue
                    record = RunRecord.load(path.parent)
                except (MltrainError, OSError, ValueError):
                    continue
                if record.doc.sweep.index == index and record.doc.sweep.dir and \
                        Path(record.doc.sweep.dir).resolve() == self.sweep_dir.resolve():
                    return record
        return None

    def _sampler(self) -> tuple:
        """(the sampler as it was after the last ask, how many trials it had asked); a fresh sampler,
        said so, when that was not saved (a sweep started before mltrain saved it)."""
        try:
            saved = pickle.loads((self.sweep_dir / SAMPLER_FILE).read_bytes())
            return saved["sampler"], int(saved["trials"])
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, KeyError, TypeError) as exc:
            self.console.status(f"warning: the sampler's state cannot be read ({type(exc).__name__}): members still to "
                                "sample are drawn from a fresh sampler with the sweep's seed, not as the first driver "
                                "would have drawn them")
            return None, 0

    # ------------------------------------------------------------------ one member of the first driver
    def _adopt(self, row: MemberRow, trial: Any) -> None:
        member = Member(index=row.index, params=dict(row.params), overrides=list(row.overrides), trial=trial,
                        status=row.status, values=[_float(v) for v in row.values], reason=row.canceled_by,
                        cut_at=row.canceled_at_interval, error=row.error, started=row.started, ended=row.ended,
                        judged=row.judged)
        member.steps = [None] * len(member.values)
        member.console = Console(prefix=f"[#{member.index}] ")
        self.members.append(member)
        record = _record(row)
        if record is not None:
            member.job, member.record = FrozenJob.load(record.dir), record
        # The policy cuts a member at an interval; the sweep's own stop (a cancel, a signal to its
        # driver) names no interval. What the sweep's stop ended runs again; what the policy cut stays cut.
        cut = bool(row.canceled_by) and row.canceled_at_interval is not None
        by_sweep = bool(row.canceled_by) and not cut
        if row.status == FAILED and record is not None and record.status == FAILED and _out_of_room(record):
            self._run_again(member, record)  # the full disk failed it, not its own result: room made, it runs again
            return
        if (row.status in TERMINAL and not (by_sweep and row.status == CANCELED)) or record is None:
            if member.ended is None:
                member.status, member.ended = row.status if row.status in TERMINAL else FAILED, time.time()
            if trial is not None:
                self._tell(member)  # a no-op unless the driver died between settling it and telling Optuna
            return
        if row.status == CANCELED:  # the cancel of the sweep stopped it, not its own result nor the policy
            self._run_again(member, record)
            return
        backends.refresh([record])
        lost = record.status == FAILED and (record.doc.error or "").startswith("driver lost")
        if by_sweep and (record.status == CANCELED or lost):  # the driver died while stopping the sweep
            self._run_again(member, record)
        elif record.status == FAILED and _out_of_room(record) and not cut:  # failed by the full disk while away
            self._run_again(member, record)
        elif record.status in TERMINAL and (not lost or cut):
            self._reread(member)
            if lost:  # the policy was cutting it when the driver died: it stays cut
                member.status, member.ended = CANCELED, time.time()
                self._tell(member)
            else:
                self._settle(member)
            member.console.status(f"{member.status} while the sweep's driver was away: settled")
        elif record.status in TERMINAL:
            self._run_again(member, record)
        else:
            self._reread(member)
            if backends.backend_of(record).take_back(record):
                self._queue_again(member, record)
            else:
                self._follow_again(member, record)
            if cut:  # the policy had cut it: the cancel the first driver asked for, asked again
                member.cancel(row.canceled_by)
            else:  # a stop of the sweep that had not reached it yet: the resumed sweep goes on with it
                member.reason = None

    def _reread(self, member: Member) -> None:
        """The member's values from the start of its metrics (sweep.json may lag behind them)."""
        member.values, member.steps, member.offset, member.mlflow_seen = [], [], 0, 0
        for value, step in self._new_values(member):
            member.values.append(value)
            member.steps.append(step)
            if member.trial is not None:
                member.trial.report(value, len(member.values))

    def _run_again(self, member: Member, record: RunRecord) -> None:
        """Run it again in its own folder under its own trial (its checkpoint, if any, is used); the
        earlier attempt's values from the step the new attempt starts at are replaced."""
        self._reread(member)
        member.restart = True
        job = dataclasses.replace(FrozenJob.load(record.dir), detach=False)
        complete_run(record, job, member.console)  # a run the driver died making has its snapshot now
        record.reopen()
        member.job, member.record = job, record
        member.status, member.reason, member.cut_at, member.error, member.ended = "NotStarted", None, None, None, None
        member.console.status(f"run again ({record.doc.attempts[-1].get('error') or 'stopped'})")
        self.rerun += 1
        self._hand_over(member, job)

    def _queue_again(self, member: Member, record: RunRecord) -> None:
        """A member its backend had queued and nothing had started (its backend took it back): submitted
        again, as the same attempt; it never ran."""
        member.console.status(f"{record.status}: queued again (nothing had started it)")
        member.job = dataclasses.replace(FrozenJob.load(record.dir), detach=False)
        self._hand_over(member, member.job)

    def _follow_again(self, member: Member, record: RunRecord) -> None:
        """A member still running without its driver (a Slurm job): watched until it ends, canceled
        through its backend when the policy or the sweep says so."""
        member.console.status(f"{record.status}: followed again")
        member.submission = Followed(backends.backend_of(record), record)


class _Told:
    """A trial Optuna has been told the end of (a member stopped by a canceled sweep, run again): Optuna
    refuses to update a finished trial, so what the member logs now goes to sweep.json only."""

    def __init__(self, number: int) -> None:
        self.number = number

    def report(self, value: float, step: int) -> None:
        pass


def mend_journal(path: Path) -> None:
    """The journal as its last whole append left it. An append cut by a full disk (or a kill mid-write) leaves a
    last line without its newline; Optuna reads past it, but the next append is written onto it, and from then
    on the journal cannot be read (chaos seed 14: `runs resume` after a full disk, JSONDecodeError). That append
    never took effect, so it is dropped, as a write-ahead log's torn tail is."""
    try:
        with open(path, "rb+") as journal:
            data = journal.read()
            if data and not data.endswith(b"\n"):
                journal.truncate(data.rfind(b"\n") + 1)
    except FileNotFoundError:
        pass


def _record(row: MemberRow) -> Optional[RunRecord]:
    if not row.run_dir or not (Path(row.run_dir) / "run.json").is_file():
        return None
    try:
        return RunRecord.load(Path(row.run_dir))
    except (MltrainError, OSError, ValueError):
        return None


def _float(value: Any) -> float:
    return float(value) if value is not None else float("nan")

