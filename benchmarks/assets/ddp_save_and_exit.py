"""A correct 2-rank gloo DDP script: a few steps, rank 0 saves the model, the process group is destroyed."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
torch.manual_seed(0)
m = DDP(torch.nn.Linear(8, 2))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(5):
    opt.zero_grad()
    m(torch.randn(16, 8)).sum().backward()
    opt.step()
if dist.get_rank() == 0:
    os.makedirs("outputs", exist_ok=True)
    torch.save(m.module.state_dict(), "outputs/model.pt")
dist.destroy_process_group()
print("done", flush=True)
