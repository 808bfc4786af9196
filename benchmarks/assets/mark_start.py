"""First thing a rank does: record when it started (the benchmark's 'all ranks running' moment)."""
import os
import sys
import time

rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID")
open(os.path.join(sys.argv[1], f"start_{rank}"), "w").write(repr(time.time()))
