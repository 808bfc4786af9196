"""mltrain: Azure ML's PyTorch training, local-first and Slurm-native, on Hydra and submitit."""

__version__ = "0.1.0"
