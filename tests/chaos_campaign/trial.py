"""One trial from its seed: draw, run, inject, recover, check; and the catalogue of scenarios."""
from __future__ import annotations

import os
import random
import shutil
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Type

from .faults import inject
from .scenario import Scenario, leftover_violations, mlflow_violations, runs_list_violations, traceback_violations
from .world import Trial, until


def catalogue() -> List[Type[Scenario]]:
    """Every scenario, in a fixed order: a seed's draw depends on this list only (never on what this machine
    can run), so a seed names the same trial everywhere."""
    from .endpoint import Endpoint
    from .local_ddp import DdpCheckpoint
    from .local_pipeline import LocalPipeline
    from .local_sweep import LocalSweep
    from .parallel import ParallelJob
    from .slurm_node_loss import SlurmNodeLoss
    from .slurm_scenarios import SlurmArraySweep, SlurmPackedSweep, SlurmPipeline
    return [LocalSweep, LocalPipeline, DdpCheckpoint, ParallelJob, Endpoint, SlurmArraySweep, SlurmPackedSweep,
            SlurmPipeline, SlurmNodeLoss]


@dataclass
class Draw:
    seed: int
    scenario: str
    fault: str
    after_markers: int
    delay_s: float

    @property
    def moment(self) -> str:
        return f"after {self.after_markers} marker(s) + {self.delay_s:.2f} s"


def draw(seed: int, scenarios: Optional[List[Type[Scenario]]] = None) -> Draw:
    rng = random.Random(seed)
    kinds = scenarios or catalogue()
    kind = rng.choices(kinds, weights=[k.weight for k in kinds])[0]
    fault = kind.faults[rng.randrange(len(kind.faults))]
    return Draw(seed, kind.name, fault, rng.randrange(kind.units), round(rng.uniform(0, kind.unit_s), 2))


@dataclass
class Outcome:
    seed: int
    scenario: str
    fault: str
    moment: str
    done: str = ""
    held: bool = True
    violations: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    took_s: float = 0.0
    skipped: str = ""
    folder: str = ""

    def row(self) -> str:
        verdict = ("skipped: " + self.skipped) if self.skipped else (
            "held" if self.held else "BROKE: " + self.violations[0])
        return f"{self.seed:>5}  {self.scenario:<18} {self.fault:<19} {self.moment:<28} {self.took_s:6.1f}s  {verdict}"

    def to_json(self) -> dict:
        return asdict(self)


def cluster_for(needs: str) -> Optional[str]:
    """The Slurm configuration a scenario's needs name, when that cluster is here."""
    if not needs:
        return None
    conf = os.environ.get("MLTRAIN_SLURM2_CONF") if needs == "slurm2" else os.environ.get("SLURM_CONF")
    return conf if conf and shutil.which("sbatch") and os.path.exists(conf) else None


def run_trial(seed: int, root: Path, keep: bool = False, only: Optional[List[str]] = None,
              fixed: Optional[Draw] = None) -> Outcome:
    """The trial `seed` draws, or `fixed`: a trial kept as it was drawn (a regression test keeps the trial that
    found its defect, whatever the catalogue draws for that seed since)."""
    kinds = {k.name: k for k in catalogue()}
    d = fixed or draw(seed)
    out = Outcome(seed, d.scenario, d.fault, d.moment)
    kind = kinds[d.scenario]
    if only and d.scenario not in only:
        out.skipped = "scenario not chosen (--scenarios)"
        return out
    conf = cluster_for(kind.needs)
    if kind.needs and not conf:
        out.skipped = f"no {kind.needs} test cluster here (SLURM_CONF / MLTRAIN_SLURM2_CONF)"
        return out
    if d.fault == "full_disk" and os.geteuid() != 0:
        out.skipped = "a full disk is a small tmpfs, which only root can mount"
        return out
    folder = root / f"seed-{seed}"
    shutil.rmtree(folder, ignore_errors=True)
    trial = Trial(folder, seed, conf, small_disk=d.fault == "full_disk")
    out.folder = str(folder)
    started = time.monotonic()
    sc = kind(trial)
    # the fault's own draws (which rank, which job) come after the trial's, from the same seed
    rng = random.Random(f"{seed}-{d.scenario}-{d.fault}")
    try:
        sc.setup()
        sc.start()
        assert sc.proc is not None
        try:
            until(lambda: len(trial.marker_names()) >= d.after_markers or sc.proc.poll() is not None,  # type: ignore
                  kind.limit_s, f"{d.after_markers} markers")
        except TimeoutError as e:
            sc.notes.append(str(e))
        time.sleep(d.delay_s)
        out.done = inject(d.fault, sc, rng)
        trial.log.append(f"# fault ({d.moment}): {out.done}")
        if d.fault == "full_disk":  # the user makes room once the command has ended, then recovers
            sc.wait_foreground()
            trial.make_room()
        sc.recover(d.fault)
        out.violations = sc.check(d.fault) + sc.unit_violations(d.fault) + runs_list_violations(trial)
        out.violations += leftover_violations(trial, allowed=sc_allowed(sc)) + mlflow_violations(trial)
        out.violations += traceback_violations(trial)
    except Exception:  # the harness's own failure is reported as one, never hidden
        out.violations.append("harness: " + traceback.format_exc().strip().splitlines()[-1])
        out.notes.append(traceback.format_exc())
    finally:
        out.notes += sc.notes
        (folder / "trial.log").write_text("\n".join(trial.log + ["", "notes:"] + out.notes) + "\n")
        trial.clean_up()
        out.took_s = round(time.monotonic() - started, 1)
    out.held = not out.violations
    if out.held and not keep:
        shutil.rmtree(folder, ignore_errors=True)
        out.folder = ""
    return out


def sc_allowed(sc: Scenario) -> List[int]:
    allowed = getattr(sc, "allowed_processes", None)
    return list(allowed()) if callable(allowed) else []


def parse_seeds(text: str) -> List[int]:
    """`1-20`, `3,7,9` or a mix: `1-5,40`."""
    seeds: List[int] = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds += range(int(lo), int(hi) + 1)
        elif part:
            seeds.append(int(part))
    return seeds


def summary(outcomes: List[Outcome]) -> Dict[str, object]:
    ran = [o for o in outcomes if not o.skipped]
    return {"trials": len(ran), "skipped": len(outcomes) - len(ran),
            "violations": [{"seed": o.seed, "scenario": o.scenario, "fault": o.fault, "moment": o.moment,
                            "violations": o.violations, "folder": o.folder,
                            "replay": f"python benchmarks/chaos.py --seeds {o.seed}"} for o in ran if not o.held],
            "outcomes": [o.to_json() for o in outcomes]}
