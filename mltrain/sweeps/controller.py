"""The HyperDrive controller: Optuna samples, mltrain runs each member as an ordinary run, and
mltrain's policies stop members that fall behind.

Optuna (ask-and-tell, its file journal in the sweep directory, no database server) picks each
member's parameters; every member is composed, frozen and created like any run, then handed to its
backend in a thread of its own, at most max_concurrent_runs at a time. The controller follows each
member's metrics.jsonl as it grows; every value of the primary metric is one interval, reported to
Optuna and, at evaluation intervals, judged by the policy (mltrain.sweeps.policies). A member the
policy stops is cancelled through its backend (its ranks stopped, or scancel) with the rule that
stopped it as its recorded reason.
"""
from __future__ import annotations

import math
import pickle
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.utils import setup_globals

from mltrain import backends
from mltrain.backends.handover import Submission
from mltrain.base.atomic import atomic_write_bytes
from mltrain.base.errors import ConfigError, MltrainError, RunCanceled, RunFailed
from mltrain.jobspec.schema import SweepConf
from mltrain.jobspec.status import CANCELED, COMPLETED, FAILED
from mltrain.launch import orchestrate
from mltrain.launch.composer import Composer
from mltrain.launch.orchestrate import CancelOnSignal, create_run
from mltrain.runs.console import Console
from mltrain.runs.metrics import read_new
from mltrain.runs.mlflow_run import logged_values
from mltrain.runs.waiting import wait_until
from mltrain.sweeps import policies, results
from mltrain.sweeps.space import Space, override_for

POLL_S = 0.2
#: The Optuna study's journal in the sweep directory (one JSON log a line).
JOURNAL = "optuna.journal"
#: Optuna's sampler, pickled after every ask, so `mltrain runs resume SWEEP` samples on as the
#: uninterrupted sweep would (Optuna's FAQ: save the sampler with the study to resume it).
SAMPLER_FILE = "optuna.sampler.pkl"


@dataclass
class Member:
    index: int
    params: Dict[str, Any]
    overrides: List[str]
    trial: Any = None
    job: Any = None
    record: Any = None
    console: Optional[Console] = None
    submission: Optional[Submission] = None  # the member's run on its way (Backend.submit)
    status: str = "NotStarted"
    values: List[float] = field(default_factory=list)
    steps: List[Optional[int]] = field(default_factory=list)  # the step each value was logged with
    restart: bool = False              # run again after its driver died: its first value says what is kept
    offset: int = 0
    mlflow_seen: int = 0           # values of the primary metric read from the member's MLflow run
    judged: int = 0                    # the last interval the policy has judged it at
    cut_at: Optional[int] = None       # the interval the policy cut it at
    reason: Optional[str] = None       # why the policy (or the sweep) stopped it
    error: Optional[str] = None
    started: Optional[float] = None
    ended: Optional[float] = None
    config: Any = None

    def cancel(self, reason: str) -> None:
        """Stop the member's run (the reason is what its record keeps)."""
        if self.submission is not None:
            self.submission.cancel(reason)

    @property
    def running(self) -> bool:
        return self.submission is not None and self.ended is None

    @property
    def run_id(self) -> Optional[str]:
        return self.job.run_id if self.job is not None else None


class Controller:
    def __init__(self, composer: Composer, settings: SweepConf, space: Space, sweep_dir: Path, seed: int) -> None:
        self.composer, self.settings, self.space = composer, settings, space
        self.sweep_dir, self.seed = sweep_dir, seed
        self.members: List[Member] = []
        self.console = Console()
        self.total = total_runs(settings, space)
        self.concurrent = concurrent_runs(settings, composer.config, self.total)
        self.goal = settings.goal
        self.started = time.time()
        self.spent = 0.0  # seconds the sweep ran before a resume (sweep.max_duration_minutes counts them)
        self.stop_reason: Optional[str] = None
        self.interrupted = False

    # ------------------------------------------------------------------ the loop
    def run(self) -> List[Member]:
        interrupt = threading.Event()
        limit = self.settings.max_duration_minutes
        deadline = (time.time() + limit * 60 - self.spent) if limit else None
        self._say_plan()
        self._begin()
        # sweep.json before any member's run exists: a driver killed as it makes the first one leaves a sweep that
        # `runs resume` takes up (that run adopted), not a run no sweep lists (chaos seed 140, third pass)
        results.write(self)

        def step() -> bool:
            """One look: stop, start and follow members; True once none is in flight and none is to come."""
            if interrupt.is_set() and self.stop_reason is None:
                self.interrupted = True
                self._stop_all("the sweep was canceled")
            if deadline is not None and time.time() >= deadline and self.stop_reason is None:
                self._stop_all(f"sweep.max_duration_minutes ({self.settings.max_duration_minutes:g}) was reached")
            while self.stop_reason is None and len(self.members) < self.total and self._in_flight() < self.concurrent:
                self._launch_next()
            if self._follow():
                results.write(self)
            return not self._in_flight() and (self.stop_reason is not None or len(self.members) >= self.total)

        with CancelOnSignal(interrupt):
            wait_until(step, poll=POLL_S)
        results.write(self, final=True)
        return self.members

    def _in_flight(self) -> int:
        return sum(1 for m in self.members if m.running)

    def _say_plan(self) -> None:
        s, p = self.settings, self.settings.early_termination
        space = ", ".join(f"{k}={v}" for k, v in self.space.describe().items())
        policy = "none" if p.policy == "none" else (
            f"{p.policy} (evaluation_interval {p.evaluation_interval}, delay_evaluation {p.delay_evaluation})")
        self.console.status(f"sweep: {s.sampling} sampling (seed {self.seed}) of {space}; {self.total} runs, "
                            f"{self.concurrent} at a time; primary metric {s.primary_metric or '-'} ({s.goal}); "
                            f"early termination {policy}")
        self.console.status(f"sweep directory {self.sweep_dir}")

    def _begin(self) -> None:
        """The study a new sweep samples from (a resumed sweep loads its own: mltrain.sweeps.resume)."""
        self.study = make_study(self.settings, self.space, self.sweep_dir, self.seed)

    # ------------------------------------------------------------------ members
    def _launch_next(self) -> None:
        trial = self.study.ask(self.space.distributions())
        atomic_write_bytes(self.sweep_dir / SAMPLER_FILE, pickle.dumps({"trials": trial.number + 1,
                                                                        "sampler": self.study.sampler}))
        self._launch(trial)
        results.write(self)  # the member's run is in sweep.json before it logs anything: a resume finds it

    def _launch(self, trial: Any) -> None:
        # the member's values (Azure's transformed draws); Optuna keeps what it sampled in its trial
        params = {d.key: d.value(trial.params[d.key]) for d in self.space.dimensions}
        member = Member(index=len(self.members), params=params, trial=trial,
                        overrides=self.space.fixed + [override_for(k, v) for k, v in params.items()])
        self.members.append(member)
        member.console = Console(prefix=f"[#{member.index}] ")
        self.console.status(f"#{member.index}: " + " ".join(override_for(k, v) for k, v in params.items()))
        try:
            self._start(member)
        except MltrainError as exc:
            if member.index == 0 and member.record is None:
                raise  # the sweep's own config is wrong: nothing has run, say it as any refused command does
            member.status, member.error, member.ended = FAILED, str(exc), time.time()
            member.console.status(f"{FAILED}: {exc}")
            self._tell(member)

    def _start(self, member: Member) -> None:
        setup_globals()
        config = self.composer.compose(member.overrides, member.index)
        job = self.composer.freeze([config])[0]
        member.config, member.job = config, job
        self.composer.mark_started()  # from here on runs exist: the sweep folder is kept
        member.record = create_run(job, member.console)
        self._hand_over(member, job)

    def _hand_over(self, member: Member, job: Any) -> None:
        """The member's run (its record made) to its backend, which takes it at once (Backend.submit)."""
        member.started = time.time()
        member.submission = orchestrate.submit(job, member.record, member.console, share=self.concurrent)

    def _follow(self) -> bool:
        """Read what running members logged, apply the policy, and settle members that ended."""
        changed, ended = False, []
        for member in self.members:
            if not member.running:
                continue
            assert member.submission is not None
            if member.submission.describe().ended:  # looked at before reading: no value written before the end is missed
                ended.append(member)
            for value, step in self._new_values(member):
                if member.restart:  # the earlier attempt's values from this step on are logged again
                    member.restart = False
                    keep = next((i for i, s in enumerate(member.steps) if s is None or step is None or s >= step),
                                len(member.steps))
                    del member.values[keep:], member.steps[keep:]
                member.values.append(value)
                member.steps.append(step)
                changed = True
                if math.isfinite(value):
                    member.trial.report(value, len(member.values))
        if changed:
            self._judge()
        for member in ended:
            self._settle(member)
        return changed or bool(ended)

    def _judge(self) -> None:
        """Apply the policy at every interval that all members still running have reached.

        Waiting for the slowest running member means the comparison at interval i always holds every
        running member's value at i, so which members are cut does not depend on who logged first;
        a member is judged once per evaluation interval."""
        policy = self.settings.early_termination
        if policy.policy == "none":
            return
        while True:
            live = [m for m in self.members if m.running and m.reason is None]
            if not live:
                return
            frontier = min(len(m.values) for m in live)
            interval = min(m.judged for m in live) + 1
            if interval > frontier:
                return
            pending = {m.index for m in live if m.judged < interval}
            if policies.is_evaluation(policy, interval):
                # what a cut member logged while it was being stopped is not compared: it stopped at its cut
                curves = {m.index: policies.Curve(m.values[: m.cut_at or None], m.index in pending, finished=not m.running)
                          for m in self.members if m.values}
                cuts = policies.decide(policy, self.goal, self.settings.primary_metric, curves, interval)
                for index, reason in cuts.items():
                    member = self.members[index]
                    member.reason, member.cut_at = reason, interval
                    member.console.status(f"canceled by {reason}")
                    member.cancel(reason)
            for m in live:
                m.judged = max(m.judged, interval)

    def _new_values(self, member: Member) -> List[tuple]:
        """(value, step) of each value of the primary metric logged since the last look."""
        metric = self.settings.primary_metric
        if not metric:
            return []
        records, member.offset = read_new(Path(member.job.run_dir) / "metrics.jsonl", member.offset)
        out = []
        for r in records:
            if r.get("name") != metric or r.get("kind", "scalar") != "scalar" or int(r.get("rank") or 0) != 0:
                continue
            if r.get("source") == "mlflow":  # folded in after the run from its MLflow run, read below already
                continue
            step = r.get("step")
            out.append((self._number(r.get("value")), step if isinstance(step, int) else None))
        logged, member.mlflow_seen = logged_values(member.job.run_dir, metric, member.mlflow_seen)
        return out + [(self._number(v), None) for v in logged]

    def _number(self, value: Any) -> float:
        """A NaN or unreadable value counts as the worst possible one (a diverged member)."""
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan
        if math.isnan(x):
            return -math.inf if self.goal == "maximize" else math.inf
        return x

    def _settle(self, member: Member) -> None:
        member.ended = time.time()
        if member.record is not None:
            member.record.reload()
            member.status = member.record.status
            member.error = member.record.doc.error or member.error
        if member.status != CANCELED:
            member.reason = None if member.reason and member.status == COMPLETED else member.reason
        self._tell(member)

    def _tell(self, member: Member) -> None:
        from optuna.trial import TrialState  # heavy

        state, value = TrialState.FAIL, None
        if member.status == COMPLETED:
            if not self.settings.primary_metric:
                # random, sobol and grid learn nothing from the value; Optuna wants one for a finished trial
                state, value = TrialState.COMPLETE, 0.0
            elif member.values:
                state, value = TrialState.COMPLETE, policies.best_of(member.values, self.goal)
            else:
                member.error = f"the run Completed without logging {self.settings.primary_metric}"
                self.console.status(f"#{member.index}: warning: {member.error}")
        elif member.status == CANCELED and member.reason and member.values:
            state = TrialState.PRUNED
        if value is not None and not math.isfinite(value):
            state, value = TrialState.FAIL, None
        try:
            # skip_if_finished: a resumed sweep may settle a member whose result was told before its driver died
            self.study.tell(member.trial.number, value if state == TrialState.COMPLETE else None, state=state,
                            skip_if_finished=True)
        except RuntimeError:
            # Optuna's GridSampler calls study.stop() once the grid is used up, which Optuna allows only
            # inside study.optimize(); the trial's result is stored before that (optuna/study/_tell.py).
            pass

    def _stop_all(self, reason: str) -> None:
        self.stop_reason = reason
        self.console.status(f"{reason}: canceling {self._in_flight()} member(s) in flight")
        for member in self.members:
            if member.running:
                member.reason = member.reason or reason
                member.cancel(reason)

    # ------------------------------------------------------------------ the end
    def raise_for_outcome(self) -> None:
        """Exit as `mltrain -m` does: non-zero when the sweep was canceled or members failed.
        Members stopped by the policy are the policy working, not a failure."""
        error = None
        failed = [m for m in self.members if m.status == FAILED]
        if self.interrupted:
            error = RunCanceled(f"sweep canceled: {sum(1 for m in self.members if m.status == CANCELED)} member(s) canceled")
        elif failed:
            error = RunFailed(f"{len(failed)} of {len(self.members)} run(s) {FAILED}: "
                              + ", ".join(m.run_id or f"#{m.index}" for m in failed))
        if error is not None:
            self.console.status(str(error))  # `mltrain` exits with the error's code without printing it again
            raise error


def total_runs(settings: SweepConf, space: Space) -> int:
    if settings.sampling == "grid":
        return min(settings.max_total_runs or space.grid_size(), space.grid_size())
    return int(settings.max_total_runs)


def concurrent_runs(settings: SweepConf, cfg: Any, total: int) -> int:
    """max_concurrent_runs, or what the run's backend allows with these compute settings."""
    if settings.max_concurrent_runs:
        return min(settings.max_concurrent_runs, total)
    backend = backends.get(backends.backend_for(str(cfg.compute.kind), str(cfg.distribution.kind),
                                                cfg.compute.get("login")))
    return max(1, min(int(backend.concurrency(cfg.compute) or 1), total))


def make_study(settings: SweepConf, space: Space, sweep_dir: Optional[Path], seed: int, sampler: Any = None,
               resume: bool = False):
    """The Optuna study: the sampler for the sampling method, its journal in the sweep directory
    (in memory for a dry run). A resumed sweep loads the journal's study, with its sampler unpickled."""
    import optuna  # heavy

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    samplers = optuna.samplers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if sampler is not None:
            pass  # a resumed sweep's, in the state the first driver left it
        elif settings.sampling == "grid":
            sampler = samplers.GridSampler({d.key: d.grid_values() for d in space.dimensions}, seed=seed)
        elif settings.sampling == "random":
            sampler = samplers.RandomSampler(seed=seed)
        elif settings.sampling == "sobol":
            sampler = samplers.QMCSampler(qmc_type="sobol", seed=seed)
        else:
            sampler = samplers.TPESampler(seed=seed)
    storage = None
    if sweep_dir is not None:
        from optuna.storages import JournalStorage  # heavy
        from optuna.storages.journal import JournalFileBackend  # heavy

        storage = JournalStorage(JournalFileBackend(str(sweep_dir / JOURNAL)))
    direction = settings.goal if settings.primary_metric else "maximize"
    return optuna.create_study(storage=storage, sampler=sampler, direction=direction, load_if_exists=resume,
                               study_name=sweep_dir.name if sweep_dir else "dry-run")


def require_optuna() -> None:
    try:
        import optuna  # noqa: F401  # optional
    except ImportError:
        raise ConfigError("sweep.sampling", "HyperDrive sweeps need Optuna: pip install 'mltrain[sweep]'") from None
