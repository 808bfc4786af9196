"""mltrain: Azure ML's PyTorch training, local-first and Slurm-native, on Hydra and submitit.

`mltrain.submit(...)` and `mltrain.Run` are the Python API (mltrain.api); `mltrain.run` is the
metrics API for scripts. They are imported on first use, so `import mltrain` stays cheap.
"""

__version__ = "0.1.0"


def __getattr__(name):
    if name in ("submit", "Run"):
        from mltrain import api

        return getattr(api, name)
    raise AttributeError(f"module 'mltrain' has no attribute {name!r}")
