"""torch.distributed driven only by Open MPI's variables (plus the rendezvous mltrain provides)."""
import os

import torch
import torch.distributed as dist

rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
world = int(os.environ["OMPI_COMM_WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=world)
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"torch-over-mpi-vars rank={rank} world={world} sum={t.item():g}", flush=True)
dist.destroy_process_group()
