"""A common DDP script: it all-reduces and exits without destroy_process_group(). It reports the
process group being destroyed at exit, which only mltrain's exit hook does."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")  # env:// from mltrain's MASTER_ADDR/PORT, RANK, WORLD_SIZE
t = torch.ones(1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()} sum {t.item():g}", flush=True)
_destroy = dist.destroy_process_group


def traced(*args, **kwargs):
    print(f"rank {dist.get_rank()}: process group destroyed at exit", flush=True)
    return _destroy(*args, **kwargs)


dist.destroy_process_group = traced
