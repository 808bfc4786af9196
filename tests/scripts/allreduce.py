"""Seed 001's DDP pattern: everything comes from the command line, which mltrain fills per rank."""
import argparse
import os

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--dist-backend", default="gloo")
p.add_argument("--dist-url", required=True)
p.add_argument("--rank", type=int, required=True)
p.add_argument("--world-size", type=int, required=True)
a = p.parse_args()
dist.init_process_group(a.dist_backend, init_method=a.dist_url, rank=a.rank, world_size=a.world_size)
t = torch.tensor([float(a.rank + 1)])
dist.all_reduce(t)
print(f"allreduce rank={a.rank} world={a.world_size} sum={t.item():g} port={os.environ['MASTER_PORT']}", flush=True)
dist.destroy_process_group()
