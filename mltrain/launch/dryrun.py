"""The dry run: the backend's Plan for each run, printed (per rank: command line, working directory,
environment; plus the mpirun line or the batch script). The live path starts the same Plan.
Building it starts nothing and creates no run directory."""
from __future__ import annotations

from mltrain import backends
from mltrain.jobspec.job import FrozenJob
from mltrain.ranks.contract import CONTRACT


def dry_run_text(job: FrozenJob) -> str:
    backend = backends.get(job.backend)
    plan = backend.plan(job)
    lines = [
        f"run {job.run_id} (dry run: nothing is started, no run directory is created)",
        f"  run_dir: {job.run_dir}",
        f"  backend: {job.backend}  compute: {job.compute.kind}  distribution: {job.distribution.kind}  "
        f"process group: {job.process_group or '-'}  world: {job.node_count} node(s) x "
        f"{job.process_count_per_node} rank(s)",
    ]
    lines.extend("  " + line for line in backend.describe(plan))
    for spec in plan.ranks:
        lines.append(f"  rank {spec['rank']}:")
        lines.append(f"    cwd: {spec['cwd']}")
        lines.append(f"    argv: {spec['argv']}")
        lines.append("    env:")
        ordered = [k for k in CONTRACT if k in spec["env"]]
        ordered += sorted(k for k in spec["env"] if k not in CONTRACT)
        lines.extend(f"      {k}={spec['env'][k]}" for k in ordered)
    return "\n".join(lines)
