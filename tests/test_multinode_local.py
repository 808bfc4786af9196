"""Several nodes on one machine (issue 49): `distribution.node_count=N` on the local compute runs N groups of
process_count_per_node ranks with the variables a cluster's nodes give them, as torchrun's --nnodes on one host
and TorchX's -j NxM do; with distribution=mpi the same under one mpirun."""
from __future__ import annotations

import json
import re

from mpi_support import require_mpi
from support import only_run, run_mltrain

#: A DDP script: every rank trains on data of its own, and DDP keeps the weights equal; each prints where it
#: sits and a digest of its weights at the end.
DDP = """\
import hashlib, os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
for _ in range(5):
    x = torch.randn(16, 8, generator=g)
    opt.zero_grad()
    model(x).pow(2).mean().backward()
    opt.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
print(f"where rank={os.environ['RANK']} local={os.environ['LOCAL_RANK']} node={os.environ['NODE_RANK']} "
      f"group={os.environ['GROUP_RANK']} world={os.environ['WORLD_SIZE']} local_world={os.environ['LOCAL_WORLD_SIZE']} "
      f"task={os.environ['AZ_BATCHAI_TASK_INDEX']} weights={digest}", flush=True)
dist.destroy_process_group()
"""

WHERE = re.compile(r"where rank=(\d) local=(\d) node=(\d) group=(\d) world=(\d) local_world=(\d) task=(\d) weights=(\w+)")


def _check_four_ranks_on_two_nodes(out: str) -> None:
    seen = {int(m.group(1)): m.groups() for m in WHERE.finditer(out)}
    assert sorted(seen) == [0, 1, 2, 3], out
    assert [seen[r][2] for r in range(4)] == ["0", "0", "1", "1"]  # node ranks
    assert [seen[r][1] for r in range(4)] == ["0", "1", "0", "1"]  # local ranks
    assert all(seen[r][3] == seen[r][2] and seen[r][4] == "4" and seen[r][5] == "2" and seen[r][6] == str(r)
               for r in range(4))
    assert len({seen[r][7] for r in range(4)}) == 1, seen  # DDP kept the four ranks' weights identical


def test_two_nodes_of_two_ranks_on_this_machine(home, project):
    (project / "ddp.py").write_text(DDP)
    r = run_mltrain("job=script", "job.script=ddp.py", "distribution=pytorch", "distribution.node_count=2",
                    "distribution.process_count_per_node=2", "distribution.backend=gloo", "run.console=all", cwd=project,
                    timeout=180)
    assert r.rc == 0, r.out + r.err
    _check_four_ranks_on_two_nodes(r.out)
    assert (r.out + r.err).count("2 nodes simulated on this machine") == 1
    run = only_run(home)
    assert run["status"] == "Completed" and len(run["ranks"]) == 4


def test_two_nodes_under_mpirun_on_this_machine(home, project):
    require_mpi()
    (project / "ddp.py").write_text(DDP)
    r = run_mltrain("job=script", "job.script=ddp.py", "distribution=mpi", "distribution.node_count=2",
                    "distribution.process_count_per_node=2", "distribution.oversubscribe=true", "run.console=all",
                    cwd=project, timeout=180)
    assert r.rc == 0, r.out + r.err
    _check_four_ranks_on_two_nodes(r.out)


def test_each_simulated_node_gets_its_own_gpus(home, project):
    """Four declared devices, two nodes of two ranks with one GPU each: every rank its own device, and a node's
    ranks pick cuda:LOCAL_RANK within their node's share (the devices the pool gave the run)."""
    (project / "show.py").write_text("import os\nprint('dev', os.environ['RANK'], os.environ['CUDA_VISIBLE_DEVICES'])\n")
    r = run_mltrain("job=script", "job.script=show.py", "distribution=pytorch", "distribution.node_count=2",
                    "distribution.process_count_per_node=2", "distribution.backend=gloo", "run.console=all",
                    cwd=project, env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert r.rc == 0, r.out + r.err
    seen = dict(re.findall(r"dev (\d) (\S+)", r.out))
    assert seen == {"0": "0,1", "1": "0,1", "2": "2,3", "3": "2,3"}, seen  # unset compute.gpus: one per rank


def test_a_command_reads_tf_config_with_its_real_ports_as_the_shell_expands_it(home, project):
    """A command's $VARS are the shell's to expand, from the rank's environment: TF_CONFIG (JSON, with quotes) is
    the one the rank got, with the ports claimed when the run started, not the dry run's placeholders."""
    r = run_mltrain("job=command", """job.command='echo "$TF_CONFIG"'""", "job.source_directory=.", "distribution=pytorch",
                    "distribution.node_count=2", "distribution.backend=gloo", "distribution.tf_config=true",
                    "run.console=all", cwd=project)
    assert r.rc == 0, r.out + r.err
    configs = [json.loads(line[line.index("{"):]) for line in r.out.splitlines() if '"cluster"' in line]
    assert len(configs) == 2 and {c["task"]["index"] for c in configs} == {0, 1}
    workers = configs[0]["cluster"]["worker"]
    assert len(workers) == 2 and all(re.fullmatch(r"127\.0\.0\.1:\d+", w) for w in workers), workers
