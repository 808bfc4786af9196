"""The mpi backend: one `mpirun` on this machine starts every rank (Azure ML's MpiConfiguration)."""
