"""Kept for Slurm jobs submitted before the package layout: their submitit pickles name
`mltrain.slurm_rank.SlurmRank`, and a requeue unpickles it. The class is mltrain.backends.slurm.rank's."""
from mltrain.backends.slurm.rank import SlurmRank

__all__ = ["SlurmRank"]
