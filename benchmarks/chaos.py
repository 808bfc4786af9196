"""The seeded fault-injection campaign (issue 63): `python benchmarks/chaos.py --seeds 1-20 --json out.json`.

Each seed draws one trial (a scenario, a fault, its moment: tests/chaos_campaign), runs it on real processes and
the test Slurm clusters (SLURM_CONF, MLTRAIN_SLURM2_CONF; their scenarios are skipped without them), and checks
the invariants after the user's recovery. One row per trial; the JSON holds {"trials": N, "violations": [...]},
each violation with its seed and the command that replays it. Exit 1 when any invariant broke.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chaos_campaign.trial import catalogue, draw, parse_seeds, run_trial, summary  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1-20", help="seeds to run: 1-20, 3,7,9 or a mix (default 1-20)")
    p.add_argument("--json", metavar="FILE", help="write {trials, violations, outcomes} here")
    p.add_argument("--root", help="folder for the trials (default: a new temporary folder)")
    p.add_argument("--keep", action="store_true", help="keep every trial's folder (a broken trial's is always kept)")
    p.add_argument("--scenarios", help="only these scenarios (comma-separated); the draws stay those of the seeds")
    p.add_argument("--plan", action="store_true", help="print each seed's draw and run nothing")
    p.add_argument("--table", metavar="FILE", nargs="+", help="print the scenarios x faults table (markdown) of "
                   "these --json files, and run nothing")
    a = p.parse_args(argv)
    if a.table:
        print(table([json.loads(Path(f).read_text()) for f in a.table]))
        return 0
    seeds = parse_seeds(a.seeds)
    only = a.scenarios.split(",") if a.scenarios else None
    known = {k.name for k in catalogue()}
    if only and set(only) - known:
        p.error(f"unknown scenario(s) {sorted(set(only) - known)}; known: {', '.join(sorted(known))}")
    if a.plan:
        for seed in seeds:
            d = draw(seed)
            print(f"{seed:>5}  {d.scenario:<18} {d.fault:<19} {d.moment}")
        return 0
    root = Path(a.root or tempfile.mkdtemp(prefix="mltrain-chaos-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"trials in {root}", flush=True)
    print(f"{'seed':>5}  {'scenario':<18} {'fault':<19} {'moment':<28} {'took':>7}  result", flush=True)
    started = time.monotonic()
    outcomes = []
    for seed in seeds:
        o = run_trial(seed, root, keep=a.keep, only=only)
        outcomes.append(o)
        print(o.row(), flush=True)
        for v in o.violations[1:]:
            print(f"{'':>7}{v}", flush=True)
    result = summary(outcomes)
    result["took_s"] = round(time.monotonic() - started, 1)
    print(f"{result['trials']} trials, {len(result['violations'])} with a violation, {result['skipped']} skipped, "
          f"{result['took_s']:.0f} s", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    return 1 if result["violations"] else 0


def table(results: list) -> str:
    """Trials and violations per scenario and fault, over several campaign files (docs/faults.md)."""
    cells: dict = {}
    for result in results:
        for o in result["outcomes"]:
            if o["skipped"]:
                continue
            cell = cells.setdefault((o["scenario"], o["fault"]), [0, 0])
            cell[0] += 1
            cell[1] += 0 if o["held"] else 1
    faults = sorted({f for _, f in cells})
    rows = ["| scenario | " + " | ".join(f"`{f}`" for f in faults) + " |", "|---|" + "---|" * len(faults)]
    for kind in [k.name for k in catalogue()]:
        if any(s == kind for s, _ in cells):
            rows.append(f"| {kind} | " + " | ".join(
                (f"{cells[(kind, f)][0]}" + (f" ({cells[(kind, f)][1]} broke)" if cells[(kind, f)][1] else ""))
                if (kind, f) in cells else "" for f in faults) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
