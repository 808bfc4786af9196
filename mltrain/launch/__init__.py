"""Launching: the frozen job, freezing, rank programs, source snapshots, the dry run, orchestration and the Hydra adapter."""
