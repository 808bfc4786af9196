"""The GPU path, where a GPU is visible: nccl DDP with 2 ranks (2 GPUs) and the trainer's AMP and
channels-last on one. Elsewhere each test skips saying why (no CI here has a GPU to demand)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import metric_rows, only_run, run_mltrain

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

NCCL_ALLREDUCE = """\
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
t = torch.tensor([float(dist.get_rank() + 1)], device="cuda")
dist.all_reduce(t)
print(f"nccl rank={dist.get_rank()} sum={t.item():g} device={torch.cuda.current_device()}", flush=True)
dist.destroy_process_group()
"""


def gpus() -> int:
    if not shutil.which("nvidia-smi"):
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def need(n: int) -> None:
    found = gpus()
    if found < n:
        pytest.skip(f"needs {n} GPU(s), {found} visible")


def test_nccl_ddp_two_ranks(home, project):
    need(2)
    (project / "nccl_allreduce.py").write_text(NCCL_ALLREDUCE)
    r = run_mltrain("job=script", "job.script=nccl_allreduce.py", "distribution=pytorch",
                    "distribution.process_count_per_node=2", "distribution.backend=nccl", "run.console=all", cwd=project,
                    timeout=300)
    assert r.rc == 0, r.out + r.err
    assert only_run(home)["process_group"] == "nccl"
    assert "nccl rank=0 sum=3 device=0" in r.out and "nccl rank=1 sum=3 device=1" in r.out


def test_trainer_amp_and_channels_last_on_one_gpu(home, project):
    need(1)
    r = run_mltrain("trainer.epochs=2", "trainer.amp=true", "compute.gpus=1", cwd=project, timeout=600)
    assert r.rc == 0, r.out + r.err
    run = only_run(home)
    assert "on cuda" in (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
    rows = metric_rows(run["dir"])
    top1 = [x["value"] for x in rows if x["name"] == "top1_accuracy"]
    rate = [x["value"] for x in rows if x["name"] == "train_images_per_second"]
    # how well 2 epochs train depends on the GPU; that the trainer ran on it and measured itself does not
    assert 0.0 <= top1[-1] <= 1.0 and rate[-1] > 0
    print(f"GPU trainer: {rate[-1]:.0f} images/s, top-1 {top1[-1]:.3f}")
