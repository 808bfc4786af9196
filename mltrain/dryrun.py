"""The dry run: what would be started, per rank (command line, working directory, environment),
plus the mpirun line or the batch script; building it starts nothing and creates no run directory."""
from __future__ import annotations

import os

from mltrain import rankenv
from mltrain.frozen import FrozenJob


def dry_run_text(job: FrozenJob) -> str:
    lines = [
        f"run {job.run_id} (dry run: nothing is started, no run directory is created)",
        f"  run_dir: {job.run_dir}",
        f"  compute: {job.compute}  distribution: {job.distribution}  backend: {job.backend or '-'}  "
        f"world: {job.node_count} node(s) x {job.process_count_per_node} rank(s)",
    ]
    if job.compute == "slurm":
        from mltrain import slurm

        lines.append("  MASTER_ADDR is the first node of the allocation; MASTER_PORT is derived from the Slurm job id")
        lines.append("  submitit parameters: " + repr(slurm.executor_parameters(job)))
        lines.append("  sbatch script:")
        lines.extend("    " + l for l in slurm.sbatch_script(job).splitlines())
        specs = rankenv.plan(job, "<first node>", "<from job id>")
    else:
        lines.append("  MASTER_PORT is chosen by the OS when the run starts; shown here as 0")
        if job.distribution == "mpi":
            from mltrain.mpi import mpirun_command

            lines.append("  mpirun: " + " ".join(mpirun_command(job, 0)[0]))
        specs = rankenv.plan(job, "127.0.0.1", 0, os.cpu_count() or 1)
    for spec in specs:
        lines.append(f"  rank {spec['rank']}:")
        lines.append(f"    cwd: {spec['cwd']}")
        lines.append(f"    argv: {spec['argv']}")
        lines.append("    env:")
        ordered = [k for k in rankenv.CONTRACT if k in spec["env"]]
        ordered += sorted(k for k in spec["env"] if k not in rankenv.CONTRACT)
        lines.extend(f"      {k}={spec['env'][k]}" for k in ordered)
    return "\n".join(lines)
