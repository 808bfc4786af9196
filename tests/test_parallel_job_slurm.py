"""A parallel job on the two-node test cluster (issue 52): one agent per node as one Slurm job's tasks, their
workers taking mini-batches from the run's shared folder; a worker killed mid-batch on one node has its
mini-batch run again."""
from __future__ import annotations

import os
from pathlib import Path

from slurm_support import require_cluster
from support import only_run, require, run_mltrain
from test_parallel_job import FLAKY, _files


def test_two_instances_on_two_slurm_nodes_share_the_queue_and_rerun_a_killed_workers_batch(home, project, tmp_path):
    require_cluster()
    conf = os.environ.get("MLTRAIN_SLURM2_CONF")
    require(None if conf and Path(conf).is_file() else "no two-node cluster: run scripts/slurm_two_nodes.sh start",
            "MLTRAIN_REQUIRE_SLURM", "the two-node Slurm cluster")
    data = _files(tmp_path / "data", 40, text=str)
    (project / "score.py").write_text(FLAKY.replace("import os, signal", "import os, signal, time")
                                      .replace("    out = []", "    out = []\n    time.sleep(0.2)"))
    r = run_mltrain("job=parallel", "compute=slurm", "compute.poll_s=0.3", f"job.source_directory={project}",
                    "job.entry_script=score.py", f"job.input_data={data}", "job.mini_batch_size=2",
                    "job.max_concurrency_per_instance=2", "job.max_retries=1", "distribution.node_count=2",
                    f"+environment.environment_variables.KILLED={tmp_path / 'killed'}", cwd=project,
                    env={"SLURM_CONF": conf}, timeout=300)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    folder = Path(run["dir"])
    rows = (folder / "outputs" / "parallel_run_step.txt").read_text().split()
    assert rows == [str(n) for n in range(1, 41) if n not in (9, 10, 13, 19, 20)]
    assert (tmp_path / "killed").exists()  # item 7's first worker was killed; its mini-batch ran again
    assert sorted(p.name for p in (folder / "logs" / "user" / "stdout").iterdir()) == ["n1", "n2"]
    holders = {c.read_text().split(":")[0] for c in (folder / "parallel" / "claims").iterdir()}
    assert holders == {"n1", "n2"}  # both nodes took mini-batches
