"""The GPU path, where a GPU is visible: nccl DDP with 2 ranks (2 GPUs) and the trainer's AMP and
channels-last on one. Elsewhere each test skips saying why (no CI here has a GPU to demand)."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import metric_rows, only_run, run_mltrain, runs
from train_support import sgd_after_a_skipped_step

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


def test_fused_sgd_after_a_step_amp_skips_trains_as_plain_sgd_on_cuda():
    """The trainer's fused SGD on the GPU, through GradScaler, with a first step that overflows: the same weights
    as unfused SGD (torch's own fused SGD, measured beside it, is reported, not asserted)."""
    need(1)
    import torch

    from mltrain.components.trainer import sgd

    ref = sgd_after_a_skipped_step(lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4), "cuda")
    ours = sgd_after_a_skipped_step(lambda m: sgd(m, 0.01, 0.9, 1e-4, fused=True), "cuda")
    raw = sgd_after_a_skipped_step(
        lambda m: torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4, fused=True), "cuda")
    print(f"fused SGD after a skipped step: torch's own differs from unfused by {(raw - ref).abs().max().item():g} "
          f"(finite: {bool(raw.isfinite().all())}); the trainer's by {(ours - ref).abs().max().item():g}")
    assert torch.allclose(ours, ref, rtol=1e-5, atol=1e-6)


def test_nccl_one_rank_inits_all_reduces_and_destroys(home, project):
    """NCCL with world size 1: what a one-GPU machine can check of the NCCL path (init, all-reduce, destroy)."""
    need(1)
    (project / "nccl_allreduce.py").write_text(NCCL_ALLREDUCE)
    r = run_mltrain("job=script", "job.script=nccl_allreduce.py", "distribution=pytorch",
                    "distribution.process_count_per_node=1", "distribution.backend=nccl", cwd=project, timeout=300)
    assert r.rc == 0, r.out + r.err
    assert "nccl rank=0 sum=1 device=0" in r.out


GPU_BURN = """\
import os, time, torch
print(f"start={time.time()} devices={os.environ.get('CUDA_VISIBLE_DEVICES')} count={torch.cuda.device_count()}", flush=True)
x = torch.randn(4096, 4096, device="cuda")
start = time.time()
while time.time() - start < 3.0:  # keep the GPU busy for three seconds
    x = (x @ x).tanh_()
torch.cuda.synchronize()
print(f"end={time.time()}", flush=True)
"""


def test_the_pool_gives_each_run_its_own_gpu_and_nvml_figures_are_recorded(home, project):
    """Two one-GPU runs at once on the machine's real devices (unset CUDA_VISIBLE_DEVICES: the driver's): each
    sees exactly one device; with two or more GPUs they differ, with one the second waits for the first. The
    GPU's utilisation and memory are in each run's system metrics (NVML)."""
    need(1)
    (project / "gpu_burn.py").write_text(GPU_BURN)
    r = run_mltrain("-m", "job=script", "job.script=gpu_burn.py", "compute.gpus=1", "compute.max_concurrent_jobs=2",
                    "run.system_metrics_interval_s=0.5", "+job.params.i=range(0,2)", cwd=project, timeout=600)
    assert r.rc == 0, r.out + r.err
    seen = []
    for run in runs(home):
        log = (Path(run["dir"]) / "logs" / "rank_0.log").read_text()
        m = re.search(r"start=([\d.]+) devices=(\S+) count=(\d+)", log)
        end = float(re.search(r"end=([\d.]+)", log).group(1))
        assert m and m.group(3) == "1", log
        seen.append((float(m.group(1)), end, m.group(2)))
        names = {x["name"]: x["value"] for x in metric_rows(run["dir"]) if x["name"].startswith("system/gpu_")}
        assert f"system/gpu_{m.group(2)}_memory_usage_megabytes" in names, sorted(names)
        assert f"system/gpu_{m.group(2)}_utilization_percentage" in names, sorted(names)
    (s1, e1, d1), (s2, e2, d2) = seen
    if gpus() >= 2:
        assert d1 != d2, seen
    else:
        assert not (s1 < e2 and s2 < e1), seen  # one GPU: the second run waited for the first


def test_trainer_decodes_jpegs_on_the_gpu_and_records_the_path(home, project, tmp_path):
    """trainer.input=gpu on a folder of real-size JPEGs: nvJPEG decodes, transforms.v2 augments on the device; the
    run's log and its `input_pipeline` metric say so. trainer.input=auto picks the same path for JPEGs on a GPU."""
    need(1)
    from jpeg_support import write_jpegs

    train, val = write_jpegs(tmp_path / "train", per_class=16), write_jpegs(tmp_path / "val", per_class=4, seed=1)
    for choice in ("gpu", "auto"):
        r = run_mltrain("data=image_directory", f"data.train_dir={train}", f"data.val_dir={val}", "data.num_workers=2",
                        "data.image_size=64", "trainer.epochs=2", "trainer.batch_size=8", f"trainer.input={choice}",
                        "compute.gpus=1", f"run.id=jpeg-{choice}", cwd=project, timeout=600)
        assert r.rc == 0, r.out[-3000:] + r.err
        run_dir = home / "runs" / f"jpeg-{choice}"
        log = (run_dir / "logs" / "rank_0.log").read_text()
        assert "on cuda" in log and "input: gpu path" in log, log[-3000:]
        rows = metric_rows(run_dir)
        assert [x["value"] for x in rows if x["name"] == "input_pipeline"] == ["gpu"]
        rate = [x["value"] for x in rows if x["name"] == "train_images_per_second"]
        assert len(rate) == 2 and rate[-1] > 0
        print(f"GPU input ({choice}): {rate[-1]:.0f} images/s")


def test_prefetched_batches_keep_their_order_raise_the_loader_s_error_and_stop_when_left():
    """Batches prepared on a side stream ahead of the step: in the loader's order, a loader's error raised in the
    training loop, and a loop left early leaves no prefetching thread behind."""
    need(1)
    import threading

    import torch

    from mltrain.components import prefetch

    device = torch.device("cuda", 0)

    def prepare(batch):
        return batch.to(device, non_blocking=True).float() * 2, batch.to(device)

    loader = [torch.full((4, 3), float(i)) for i in range(20)]
    got = [int(images[0, 0].item()) for images, _ in prefetch.batches(loader, prepare, device)]
    assert got == [2 * i for i in range(20)]

    def failing():
        yield torch.zeros(4, 3)
        raise ValueError("image 7 is not readable")

    with pytest.raises(ValueError, match="image 7"):
        for _ in prefetch.batches(failing(), prepare, device):
            pass
    ready = prefetch.batches(loader, prepare, device)
    next(ready)
    ready.close()
    assert not [t for t in threading.enumerate() if t.name == "mltrain-prefetch"]
