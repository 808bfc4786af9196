"""A plain mpi4py program: an allreduce over MPI itself."""
import os

from mpi4py import MPI

comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(f"mpi rank={comm.Get_rank()} size={comm.Get_size()} sum={total} "
      f"RANK={os.environ['RANK']} LOCAL_RANK={os.environ['LOCAL_RANK']}", flush=True)
