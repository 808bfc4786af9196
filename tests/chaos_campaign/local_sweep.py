"""A local HyperDrive sweep of 6 members, 2 at a time (grid over one parameter), each logging 4 values."""
from __future__ import annotations

from typing import Dict, List, Tuple

from .scenario import Scenario, status_violation

MEMBER = '''
import sys, time
from mltrain import run
x = int(sys.argv[1])
for step in range(1, 5):
    run.log("score", x * 10 + step, step=step)
    time.sleep(0.25)
mark("member%d" % x)
'''

MEMBERS = 6


class LocalSweep(Scenario):
    name = "local_sweep"
    faults = ("kill_driver", "sigint_foreground", "sigterm_foreground", "kill_rank", "full_disk")
    units = MEMBERS
    unit_s = 1.0
    limit_s = 120.0
    extra: Tuple[str, ...] = ()

    def args(self) -> List[str]:
        return ["-m", "job=script", "job.script=member.py", "job.arguments=[$AML_PARAMETER_x]",
                f"+job.params.x=choice({','.join(str(i) for i in range(1, MEMBERS + 1))})", "sweep.sampling=grid",
                "sweep.max_concurrent_runs=2", "sweep.primary_metric=score", "sweep.goal=maximize", "run.console=none", *self.extra]

    def setup(self) -> None:
        self.write("member.py", MEMBER)

    def start(self):
        self.proc = self.t.start(*self.args())
        return self.proc

    def recover(self, fault: str) -> None:
        self.rc = self.wait_foreground()
        self.killed_member = getattr(self, "killed_member", None)
        docs = self.t.sweep_docs()
        if not docs or docs[0].get("status") != "Completed":  # the sweep was stopped: the user resumes it
            sweeps = self.t.sweep_dirs()
            if not sweeps:
                self.notes.append("no sweep folder was made before the fault: the user runs the sweep again")
                self.proc = self.t.start(*self.args())
                self.rc = self.wait_foreground()
            else:
                done = self.t.mltrain("runs", "resume", str(sweeps[0]), timeout=self.limit_s)
                self.resume_rc = done.rc
                if done.rc != 0:
                    self.notes.append(f"runs resume exited {done.rc}: {(done.err or done.out).strip()[-300:]}")

    def expected_units(self, fault: str) -> Dict[str, Tuple[int, int]]:
        want = {f"member{i}": (1, 1) for i in range(1, MEMBERS + 1)}
        for unit in self.stopped_at_their_end():
            want[unit] = (1, 2)
        if fault == "kill_rank" and self.killed_member:
            want[self.killed_member] = (0, 0)
        return want

    def stopped_at_their_end(self) -> List[str]:
        """Members with an earlier attempt the fault stopped, whose rank may have done its work before the stop
        reached it (the marker is its script's last line): that rank is not known to have ended by itself with
        exit code 0 (no exit code recorded: its driver died; or stopped by mltrain). Such a member runs again
        on resume, at least once as Azure's jobs are; one whose ranks all ended well must not."""
        out = []
        for r in self.t.run_records():
            x = next((o.split("=", 1)[1] for o in r.get("overrides", []) if o.startswith("+job.params.x=")), None)
            for attempt in r.get("attempts") or []:
                ranks = (attempt.get("ranks") or {}).values()
                ended_well = bool(ranks) and all(k.get("exit_code") == 0 and not k.get("stopped_by_mltrain")
                                                 and not k.get("stopped_by_signal")
                                                 for k in ranks)
                if x is not None and attempt.get("status") != "Completed" and not ended_well:
                    out.append(f"member{x}")
        return out

    def check(self, fault: str) -> List[str]:
        out: List[str] = []
        docs = self.t.sweep_docs()
        if len(docs) != 1:
            return [f"sweep: {len(docs)} sweep records, expected 1"]
        doc = docs[0]
        records = {r["id"]: r for r in self.t.run_records()}
        members = doc.get("members", [])
        if len(members) != MEMBERS:
            out.append(f"sweep: {len(members)} members recorded, expected {MEMBERS}")
        ids = [m.get("run_id") for m in members]
        if len(set(ids)) != len(ids) or set(records) != set(ids):
            out.append(f"sweep: members {sorted(ids)} but run folders {sorted(records)}")
        for m in members:
            r = records.get(m.get("run_id"), {})
            x = (m.get("params") or {}).get("+job.params.x")
            unit = f"member{x}"
            want = "Failed" if fault == "kill_rank" and unit == self.killed_member else "Completed"
            out += status_violation(f"member {unit} ({m.get('run_id')}) in its run.json", r.get("status"), want)
            out += status_violation(f"member {unit} in sweep.json", m.get("status"), want)
            if want == "Completed" and r:
                out += self.metric_violations(r, "score", 4)
        out += status_violation("the sweep", doc.get("status"), "Completed")
        return out

    def running_rank_pids(self) -> List[Tuple[str, int]]:
        """(unit, pid) of members whose rank 0 runs now."""
        found = []
        for r in self.t.run_records():
            pid = ((r.get("ranks") or {}).get("0") or {}).get("pid")
            x = next((o.split("=", 1)[1] for o in r.get("overrides", []) if o.startswith("+job.params.x=")), None)
            if r.get("status") == "Running" and pid and x is not None:
                found.append((f"member{x}", int(pid)))
        return found
