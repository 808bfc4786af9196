"""Pipeline step 2 (the MpiStep): every rank sums its share of the prepared numbers; rank 0 writes the model."""
import argparse
import json
import os
from pathlib import Path

from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--model", required=True)
a = p.parse_args()
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
numbers = [float(x) for x in Path(a.data, "data.txt").read_text().split()]
total = comm.allreduce(sum(numbers[rank::size]), op=MPI.SUM)
if rank == 0:
    Path(a.model, "model.json").write_text(json.dumps({"total": total, "world_size": size}))
    assert os.environ["AZURE_ML_OUTPUT_model"] == a.model
print(f"rank {rank}/{size}: total {total}")
if os.environ.get("AML_PARAMETER_fail") == "1":
    raise SystemExit(3)
