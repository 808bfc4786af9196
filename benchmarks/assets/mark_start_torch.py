"""A rank that starts like a training script: import torch, then record the moment it is ready."""
import os
import sys
import time

import torch  # noqa: F401

rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
open(os.path.join(sys.argv[1], f"start_{rank}"), "w").write(repr(time.time()))
