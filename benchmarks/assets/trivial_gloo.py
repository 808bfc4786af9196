"""The same trivial 2-rank job for every launcher: env:// rendezvous, one gloo all_reduce."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()
dist.destroy_process_group()
